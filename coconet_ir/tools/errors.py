"""How the command-line tools end on bad input: a diagnostic, never a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

from xdsl.utils.exceptions import DiagnosticException, ParseError, PassFailedException

USER_ERRORS = (
    DiagnosticException,
    ParseError,
    PassFailedException,
    OSError,
    UnicodeDecodeError,
    ValueError,
)
"""Exceptions that mean the input or the request is bad, not the tool."""


def report(tool: str, err: BaseException, code: int) -> NoReturn:
    from coconet_ir.ir import describe_parse_error

    if isinstance(err, ParseError):
        message = describe_parse_error(err)
    else:
        message = str(err).strip() or type(err).__name__
    notes = getattr(err, "__notes__", [])
    if notes and not isinstance(err, ParseError):
        message += "\n" + "\n".join(str(n).rstrip() for n in notes)
    if ": error:" not in message.split("\n", 1)[0]:
        message = f"{tool}: error: {message}"
    print(message, file=sys.stderr)
    sys.exit(code)


def run_guarded(tool: str, main: Callable[[], None], user_error_code: int = 1) -> None:
    """Run `main`; turn every exception into a one-message exit.

    Set COCONET_TRACEBACK=1 to see the Python traceback of an internal error.
    """
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except USER_ERRORS as err:
        if os.environ.get("COCONET_TRACEBACK"):
            raise
        report(tool, err, user_error_code)
    except Exception as err:  # an internal error: still no traceback by default
        if os.environ.get("COCONET_TRACEBACK"):
            raise
        report(
            tool,
            RuntimeError(
                f"internal error ({type(err).__name__}: {err}); rerun with "
                "COCONET_TRACEBACK=1 for details and report it"
            ),
            user_error_code,
        )
