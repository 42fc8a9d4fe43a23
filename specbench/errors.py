"""User-facing errors: one sentence that says what to change; the CLI maps them to exit code 2."""


class SpecbenchError(Exception):
    """Bad input or an unusable setting. The message is shown as one line; the exit code is 2."""
