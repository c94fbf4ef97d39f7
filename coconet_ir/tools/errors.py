"""How the command-line tools end on bad input: a diagnostic, never a traceback.

Every exception that escapes a tool's `main` becomes one MLIR-style message on
stderr (`FILE:LINE:COL: error: ...` when the error has a location, else
`TOOL: error: ...`) and an exit code:

- an exception with an integer `exit_code` attribute exits with that code;
- a user error (bad input, bad request: `USER_ERRORS`) exits `user_error_code`;
- anything else is an internal error and exits `internal_error_code`.

Set `COCONET_TRACEBACK=1` to see the Python traceback instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
)

USER_ERRORS = (
    DiagnosticException,
    ParseError,
    PassFailedException,
    ArgSpecParseError,
    OSError,
    UnicodeDecodeError,
    ValueError,
)
"""Exceptions that mean the input or the request is bad, not the tool.

`ArgSpecParseError` (a malformed `-p` pipeline) derives from `BaseException` in
xDSL, so it is listed explicitly."""


def describe_pipeline_error(err: ArgSpecParseError) -> str:
    """`pass-pipeline:1:14: error: MESSAGE` and the pipeline with a caret.

    xDSL words it as a header line, the location, the source line, and a caret
    line followed by the message; this reorders it into MLIR's shape.
    """
    lines = str(err).split("\n")
    if len(lines) < 4 or not lines[1].startswith("pass-pipeline:"):
        return f"error: bad pass pipeline: {' '.join(str(err).split())}"
    caret = lines[3].rstrip()
    message = " ".join(" ".join(lines[4:]).split()) or "malformed pipeline"
    return f"{lines[1]}: error: bad pass pipeline: {message}\n{lines[2]}\n{caret}"


def describe(err: BaseException) -> str:
    """The diagnostic text for one exception, without the tool prefix."""
    from coconet_ir.ir import describe_parse_error

    if isinstance(err, ParseError):
        return describe_parse_error(err)
    if isinstance(err, ArgSpecParseError):
        return describe_pipeline_error(err)
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: error: {err.strerror}"
    message = str(err).strip() or type(err).__name__
    notes = getattr(err, "__notes__", [])
    if notes:
        message += "\n" + "\n".join(str(n).rstrip() for n in notes)
    return message


def report(tool: str, err: BaseException, code: int) -> NoReturn:
    """Print `err` as one diagnostic on stderr and exit with `code`."""
    message = describe(err)
    first_line = message.split("\n", 1)[0]
    if first_line.startswith("error:"):
        message = f"{tool}: {message}"
    elif ": error:" not in first_line:
        message = f"{tool}: error: {message}"
    print(message, file=sys.stderr)
    sys.exit(code)


def quiet_broken_pipe() -> NoReturn:
    """The reader of stdout went away (`tool | head`): stop without a message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(1)


def run_guarded(
    tool: str,
    main: Callable[[], int | None],
    user_error_code: int = 1,
    internal_error_code: int | None = None,
) -> None:
    """Run `main` and exit with the code it returns (0 for None); turn every
    exception into a one-message exit.

    `internal_error_code` defaults to `user_error_code`. Set COCONET_TRACEBACK=1
    to see the Python traceback of any error.
    """
    if internal_error_code is None:
        internal_error_code = user_error_code
    try:
        code = main()
        sys.stdout.flush()
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        quiet_broken_pipe()
    except USER_ERRORS as err:
        if os.environ.get("COCONET_TRACEBACK"):
            raise
        report(tool, err, exit_code_of(err, user_error_code))
    except Exception as err:  # an internal error: still no traceback by default
        if os.environ.get("COCONET_TRACEBACK"):
            raise
        report(
            tool,
            RuntimeError(
                f"internal error ({type(err).__name__}: {err}); rerun with "
                "COCONET_TRACEBACK=1 for details and report it"
            ),
            exit_code_of(err, internal_error_code),
        )
    if code:
        sys.exit(code)


def exit_code_of(err: BaseException, default: int) -> int:
    """The exit code an exception asks for (`exit_code` attribute), or `default`."""
    code = getattr(err, "exit_code", None)
    return code if isinstance(code, int) else default
