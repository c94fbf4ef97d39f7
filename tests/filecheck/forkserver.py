"""A fork server for the FileCheck suites: `coconet-opt` and `coconet-run` with
their imports done once per lit run instead of once per RUN command.

Importing xDSL and coconet_ir is most of what a `coconet-opt` call costs
(~0.6 s of CPU), and the suites run several hundred of them. lit.cfg.py starts
`python forkserver.py serve SOCKET` once; RUN lines then call
`python -S forkserver.py SOCKET TOOL ARGS...` (a client that imports nothing
of the project): it passes its stdin, stdout and stderr, its working directory
and environment to the server, which forks a child that runs the tool's
`main` with them, as the installed script would, and reports its exit status.
Each child starts from the server's state before any command ran.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import sys

TOOLS = {
    "coconet-opt": ("coconet_ir.tools.coconet_opt", "main"),
    "coconet-run": ("coconet_ir.tools.coconet_run", "main"),
}


def _exit_code(code: object) -> int:
    """What the interpreter exits with for `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run(connection: socket.socket, request: dict, fds: list[int]) -> int:
    """In the forked child: become the client's process and run the tool."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin = os.fdopen(0, "r", closefd=False)
    sys.stdout = os.fdopen(1, "w", closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    tool, *argv = request["argv"]
    sys.argv = [tool, *argv]
    module, name = TOOLS[tool]
    try:
        getattr(sys.modules[module], name)(argv)
        code = 0
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
    import importlib

    for module, _ in TOOLS.values():
        importlib.import_module(module)
    # Reaped (not ignored) so that their CPU time counts as the server's.
    signal.signal(signal.SIGCHLD, _reap)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        connection, _ = server.accept()
        fds = array.array("i")
        message, ancillary, _, _ = connection.recvmsg(1 << 20, socket.CMSG_LEN(12))
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        if os.fork() == 0:
            server.close()
            code = _run(connection, json.loads(message), list(fds))
            os._exit(code)
        connection.close()
        for fd in fds:
            os.close(fd)


def client(path: str, argv: list[str]) -> int:
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    fds = array.array("i", [0, 1, 2])
    connection.sendmsg(
        [json.dumps(request).encode()],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())],
    )
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
