"""A fork server for the FileCheck suites: `coconet-opt`, `coconet-run`,
`filecheck` and `python -m coconet_ir.backend.cuda.mlir_interop` with their
imports done once per lit run instead of once per RUN command.

Importing xDSL and coconet_ir is most of what a `coconet-opt` call costs
(~0.6 s of CPU), and importing the filecheck package most of what a
`filecheck` call costs (~0.1 s); the suites run several hundred of each.
lit.cfg.py starts `python forkserver.py serve SOCKET` once; RUN lines then call
`python -S forkserver.py SOCKET TOOL ARGS...` (a client that imports nothing
of the project), or its C twin forkclient.c where lit.cfg.py could build it:
it passes its stdin, stdout and stderr, its working directory and environment
to the server, which forks a child that runs the tool's `main` with them, as
the installed script would, and reports its exit status. Each child starts
from the server's state before any command ran.

The request is one message of NUL-terminated fields: the number of arguments,
TOOL and ARGS, the working directory, then the environment's NAME=VALUE
entries; the client's standard streams go with it (SCM_RIGHTS). The reply is
the exit status in decimal, or nothing when the child died of a signal.
"""

from __future__ import annotations

# The client imports only built-in modules (no `socket`, which imports enum and
# selectors): its start-up is a third of a call.
import _socket
import os
import sys

TOOLS = {
    "coconet-opt": "coconet_ir.tools.coconet_opt",
    "coconet-run": "coconet_ir.tools.coconet_run",
    "filecheck": "filecheck.main",
    "mlir-interop": "coconet_ir.backend.cuda.mlir_interop",
}
"""Each tool's module; the child calls its `main(ARGS)`, and exits with what
`main` returns or exits with."""

PRELOAD = (
    "coconet_ir.interpreter",  # coconet-run (with networkx), on first use
    "coconet_ir.dialects.coco.canonicalization",
    "xdsl.targets.mlir",  # coconet-opt's default output
    "xdsl.syntax_printer",
    "xdsl.transforms.dead_code_elimination",
    "numpy.random",
    "email.parser",  # coconet-run reads xDSL's version with importlib.metadata
)
"""What the tools import only when a command needs it, imported by the
server as well, so that a child does not import it again for each command:
besides these, every pass, lowering and target of coconet_ir.universe."""


def _preload() -> None:
    import importlib

    from coconet_ir import universe

    for module in (*TOOLS.values(), *PRELOAD):
        importlib.import_module(module)
    for get in (
        *universe.get_all_passes().values(),
        *universe.get_all_targets().values(),
    ):
        get()


def _main(tool: str, argv: list[str]) -> object:
    """What the tool's script does with ARGS (after the imports)."""
    module = sys.modules[TOOLS[tool]]
    if tool == "filecheck":
        # Its script passes the program name first, and its colours follow
        # whether stdout is a terminal (decided at import, in the server).
        sys.modules["filecheck.colors"].COLOR_SUPPORT = sys.stdout.isatty()
        return module.main([tool, *argv])
    return module.main(argv)


def _exit_code(code: object) -> int:
    """What the interpreter exits with for `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _request(message: bytes) -> tuple[list[str], str, dict[str, str]]:
    """The tool and its arguments, the directory and the environment."""
    fields = [os.fsdecode(field) for field in message.split(b"\0")[:-1]]
    count = int(fields[0])
    entries = (entry.partition("=") for entry in fields[count + 2 :])
    return fields[1 : count + 1], fields[count + 1], {k: v for k, _, v in entries}


def _run(connection: _socket.socket, message: bytes, fds: list[int]) -> int:
    """In the forked child: become the client's process and run the tool."""
    import signal

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    (tool, *argv), cwd, environment = _request(message)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environment)
    sys.stdin = os.fdopen(0, "r", closefd=False)
    sys.stdout = os.fdopen(1, "w", closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = [tool, *argv]
    try:
        code = _exit_code(_main(tool, argv))
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    connection.sendall(str(code).encode())
    return code


def _reap(*_: object) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def serve(path: str) -> None:
    import array
    import gc
    import select
    import signal
    import socket

    _preload()
    # What the imports made is never freed: the children's garbage collections
    # skip it instead of touching (and so copying) each of its pages.
    gc.freeze()
    # Reaped (not ignored) so that their CPU time counts as the server's.
    signal.signal(signal.SIGCHLD, _reap)
    # A ^C is lit's to handle (its exit stops the server), not a traceback here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    parent = os.getppid()
    # lit stops the server when it exits; should lit be killed instead, the
    # server notices within a second that its parent is gone.
    while os.getppid() == parent:
        if not select.select([server], [], [], 1.0)[0]:
            continue
        connection, _ = server.accept()
        fds = array.array("i")
        message, ancillary, _, _ = connection.recvmsg(1 << 16, socket.CMSG_LEN(12))
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        while chunk := connection.recv(1 << 16):  # the client sends, then shuts down
            message += chunk
        if os.fork() == 0:
            server.close()
            code = _run(connection, message, list(fds))
            os._exit(code)
        connection.close()
        for fd in fds:
            os.close(fd)
    server.close()
    os.unlink(path)
    os.rmdir(os.path.dirname(path))


def client(path: str, argv: list[str]) -> int:
    environment = (f"{name}={value}" for name, value in os.environ.items())
    fields = [str(len(argv)), *argv, os.getcwd(), *environment]
    message = b"".join(os.fsencode(field) + b"\0" for field in fields)
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    connection.connect(path)
    ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)]
    sent = connection.sendmsg([message], ancillary)
    connection.sendall(message[sent:])
    connection.shutdown(_socket.SHUT_WR)
    reply = b""
    while chunk := connection.recv(64):
        reply += chunk
    if not reply:  # the child died of a signal
        print(f"{argv[0]}: killed", file=sys.stderr)
        return 1
    return int(reply)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(client(sys.argv[1], sys.argv[2:]))
