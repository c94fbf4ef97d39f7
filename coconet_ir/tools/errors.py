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

import errno
import os
import sys
import warnings
from collections.abc import Callable
from typing import NoReturn, TextIO

from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
)

from coconet_ir.diagnostics import CocoError, CocoWarning, Diagnostic

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


def write_problem(path: str, err: OSError) -> str:
    """Why `path` cannot be written: names the directory when it is the
    directory that is missing (`-o out/x.mlir` with no `out/`)."""
    directory = os.path.dirname(path) or "."
    if err.errno == errno.ENOENT and not os.path.isdir(directory):
        return f"cannot write: the directory {directory} does not exist"
    return f"cannot write: {err.strerror or err}"


def pipeline_diagnostic(err: ArgSpecParseError) -> Diagnostic:
    """`pass-pipeline:1:14: error: MESSAGE` and the pipeline with a caret."""
    from coconet_ir.pipeline import syntax_error_parts

    parts = syntax_error_parts(err)
    if parts is None:
        return Diagnostic(f"bad pass pipeline: {' '.join(str(err).split())}")
    location, source, caret, message = parts
    return Diagnostic(
        f"bad pass pipeline: {message}", location, context=f"{source}\n{caret}"
    )


def diagnostic_of(err: BaseException) -> Diagnostic:
    """The diagnostic for one exception."""
    from coconet_ir.ir import parse_error

    if isinstance(err, CocoError):
        return err.diagnostic
    if isinstance(err, ParseError):
        return parse_error(err).diagnostic
    if isinstance(err, ArgSpecParseError):
        return pipeline_diagnostic(err)
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return Diagnostic(err.strerror, str(err.filename))
    notes = [str(n).rstrip() for n in getattr(err, "__notes__", [])]
    return Diagnostic(str(err).strip() or type(err).__name__, context="\n".join(notes))


def report(tool: str, err: BaseException, code: int) -> NoReturn:
    """Print `err` as one diagnostic on stderr (`TOOL: error: ...` when it has
    no location) and exit with `code`."""
    diagnostic = diagnostic_of(err)
    prefix = "" if diagnostic.location else f"{tool}: "
    print(f"{prefix}{diagnostic}", file=sys.stderr)
    sys.exit(code)


def quiet_broken_pipe() -> NoReturn:
    """The reader of stdout went away (`tool | head`): stop without a message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(1)


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Print a CocoWarning as the diagnostic it is (`FILE:LINE:COL: warning:
    ...`); other warnings as Python prints them."""
    if not issubclass(category, CocoWarning):
        text = warnings.formatwarning(message, category, filename, lineno, line)
        print(text, end="", file=file or sys.stderr)
        return
    print(message, file=file or sys.stderr)


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
    warnings.showwarning = show_warning
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
