"""What each exit code of `specbench` means: one meaning per code, for every command.

    0    success: the run finished, no regression, lossless
    1    a verdict only: `compare` found a regression, `verify` found a failed check
    2    bad input, or a fault of the environment before anything was measured (permission
         denied, disk full, file-size limit, a path that is a file or a directory; cli/faults.py):
         one line `error: ...` on stderr, never a traceback
    3    an unexpected internal error: one line naming the log file that holds the traceback
    4    `run` incomplete: failures beyond --max-failure-rate, or stopped mid-run by the
         environment (records kept; `--resume` finishes it)
    5    `compare` is inconclusive: no regression found, but a gating row could not have seen its
         minimum effect (precedence 2/3 > 1 > 5 > 0; `--allow-inconclusive` passes it)
    10   `canary`: keep watching (not settled yet; 0 is promote)
    11   `canary`: roll back (a guard crossed its margin)
    130  interrupted (Ctrl-C); the records written so far are kept
    141  the output's reader went away (`specbench … | head`): the rest of the output is dropped
         quietly, as a program killed by SIGPIPE would (128 + 13); records written so far are kept

`cli/app.py` enforces them (a SpecbenchError → 2, an OSError of the environment → 2 or 4,
anything unexpected → 3); the commands import
them from here, never from the app.
"""

from __future__ import annotations

EXIT_OK, EXIT_VERDICT, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INCOMPLETE = 0, 1, 2, 3, 4
EXIT_INCONCLUSIVE = 5
EXIT_CANARY_WATCH, EXIT_CANARY_ROLLBACK = 10, 11
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, the shells' code for it

EXIT_CODES_HELP = (
    "Exit codes: 0 success (no regression, lossless); 1 a verdict (compare: regression, verify: "
    "check failed); 2 bad input (one 'error:' line); 3 internal error (the traceback is in the "
    "log file named on stderr); 4 run incomplete (failures beyond --max-failure-rate, or a full "
    "disk mid-run; records kept, --resume finishes it); "
    "5 compare inconclusive (a gating row cannot detect its minimum effect); "
    "10 canary: keep watching (0: promote); 11 canary: roll back; 130 interrupted; "
    "141 the output's reader went away (| head)."
)


def one_line(text: str) -> str:
    """A message on one line: every run of whitespace (newlines included) becomes one space;
    spelled in ASCII under `--plain` (report/render/ascii_text.py)."""
    from specbench.report.render.terminal import ascii_mode, to_ascii

    line = " ".join(str(text).split())
    return to_ascii(line) if ascii_mode() else line


def warn(text: str) -> None:
    """A warning: one line `warning: ...` on stderr, never stdout (stdout is the command's
    output, e.g. --json)."""
    import typer

    typer.echo(f"warning: {one_line(text)}", err=True)
