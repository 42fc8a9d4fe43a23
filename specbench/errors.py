"""User-facing errors: one sentence that says what to change; the CLI maps them to exit code 2."""


class SpecbenchError(Exception):
    """Bad input or an unusable setting. The message is shown as one line; the exit code is 2."""


class SpecbenchWarning(UserWarning):
    """Something the user should know that does not stop the command (e.g. a truncated record line
    from a killed run). The CLI prints it as one line `warning: ...`."""


def malformed_file(path: object, exc: Exception, what: str = "file") -> SpecbenchError:
    """A run-directory file that parsed but holds a field of the wrong shape, as one line naming
    the file and (for a missing key) the field. For readers whose typed model lives in a layer
    that only reads dicts (the analyses): they raise KeyError / TypeError / ValueError."""
    if isinstance(exc, KeyError):
        return SpecbenchError(f"{path}: missing field {exc.args[0]!r}; not a valid {what}")
    detail = " ".join(str(exc).split())[:120]
    return SpecbenchError(
        f"{path}: a field has the wrong type or value ({detail}); not a valid {what}"
    )
