"""User-facing errors: one sentence that says what to change; the CLI maps them to exit code 2."""


class SpecbenchError(Exception):
    """Bad input or an unusable setting. The message is shown as one line; the exit code is 2."""


class SpecbenchWarning(UserWarning):
    """Something the user should know that does not stop the command (e.g. a truncated record line
    from a killed run). The CLI prints it as one line `warning: ...`."""
