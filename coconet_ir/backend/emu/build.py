"""Build an emitted `.cu` into a shared library for the CPU emulation.

`g++ -std=c++20 -O1 -fPIC -shared -pthread -I <runtime_dir> -include
<runtime_dir>/coco_runtime.h -x c++ FILE.cu -x none coco_emu_harness.o`,
cached by the hash of the source, the runtime headers, the compiler and the
flags under `$COCONET_CACHE/emu` (default `~/.cache/coconet-ir/emu`).

Most of a build is the same for every program, so it is done once per flag
set and cached under the same kind of key:

- the harness the driver calls (`coco_emu_harness.h`: world creation,
  contexts, statistics) is compiled once into an object file
  (`harness_object`) that every library links;
- with g++, the runtime headers are precompiled (`coco_runtime.h.gch`,
  `precompiled_header`) and force-included from there. g++ checks that a
  `.gch` was built with compatible flags and, where it was not, reads the
  headers themselves, so the library is the same either way.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from coconet_ir.backend.cuda import runtime_dir
from coconet_ir.diagnostics import CocoError

BASE_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-shared", "-pthread")
RUNTIME = "coco_runtime.h"
"""The runtime header every emulated build force-includes (and precompiles)."""
HARNESS = "coco_emu_harness.h"
"""The emulation's harness, compiled once per flag set and linked into every
emulated library (`harness_object`)."""
# `-g1`: line tables only, which is what a sanitizer's report needs to name the
# file and line of each frame; full debug information made the sanitized
# harness take 40% longer to build (ASan 13.2 s against 9.4 s).
SANITIZER_FLAGS = {
    "thread": ("-fsanitize=thread", "-g1"),
    "address": ("-fsanitize=address", "-fno-omit-frame-pointer", "-g1"),
}


class EmulatorCompileError(CocoError):
    """g++ refused the emitted source; `stderr` holds its messages."""

    def __init__(self, message: str, stderr: str = ""):
        self.stderr = stderr
        super().__init__(message)


def cache_dir() -> Path:
    root = os.environ.get("COCONET_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "coconet-ir"
    return base / "emu"


def compiler() -> str:
    """The C++ compiler: `$COCONET_CXX`, else g++."""
    return os.environ.get("COCONET_CXX") or shutil.which("g++") or "g++"


def emulation_flags(sanitize: str | None = None) -> list[str]:
    if sanitize is not None and sanitize not in SANITIZER_FLAGS:
        raise CocoError(
            f"unknown sanitizer '{sanitize}' (expected one of "
            f"{', '.join(sorted(SANITIZER_FLAGS))})"
        )
    flags = [
        *BASE_FLAGS,
        f"-I{runtime_dir()}",
        "-include",
        str(runtime_dir() / RUNTIME),
    ]
    if sanitize:
        flags += SANITIZER_FLAGS[sanitize]
    return flags


def _key(cu_source: str, command: list[str]) -> str:
    digest = hashlib.sha256()
    digest.update(cu_source.encode())
    for header in sorted(runtime_dir().glob("*.h")):
        digest.update(header.name.encode())
        digest.update(header.read_bytes())
    digest.update("\0".join(command).encode())
    return digest.hexdigest()[:32]


def build_cached(
    cu_source: str,
    directory: Path,
    key_command: list[str],
    suffix: str,
    command_for: Callable[[Path, Path], list[str]],
    error: Callable[[str, str], CocoError],
    what: str,
) -> Path:
    """The library built from `cu_source` by `command_for(source, out)`,
    cached in `directory` under the hash of the source, the runtime headers
    and `key_command` (as `KEY{suffix}.so`); written atomically. A failed
    build raises `error(message, stderr)`. The emulation and the GPU backend
    share it."""
    key = _key(cu_source, key_command)
    library = directory / f"{key}{suffix}.so"
    if library.exists():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{key}.cu"
    if not source.exists():  # atomically: another process may compile it now
        with tempfile.NamedTemporaryFile(
            "w", dir=directory, prefix=".", suffix=".cu", delete=False
        ) as temporary:
            temporary.write(cu_source)
        os.replace(temporary.name, source)
    failed = build_once(library, lambda out: command_for(source, out))
    if failed is not None:
        raise error(f"{what} of {source} failed:\n{failed.strip()}", failed)
    return library


def build_once(target: Path, command_for: Callable[[Path], list[str]]) -> str | None:
    """Make `target`, if it is not there yet, with `command_for(partial)`,
    which writes `partial`, renamed to `target` when the command succeeds
    (atomic: builds running at once never see a half-written file). A
    process that wants a target another is building waits for it (a lock
    beside it, `.NAME.lock`) instead of building it again: the test suite's
    workers start by wanting the same harness and header. None once
    `target` is there; the command's messages where it failed."""
    if target.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return None
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=".", suffix=target.suffix, delete=False
        ) as temporary:
            partial = Path(temporary.name)
        try:
            result = subprocess.run(
                command_for(partial), capture_output=True, text=True
            )
            if result.returncode != 0:
                return result.stderr
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return None


def _shared_flags(command: list[str]) -> list[str]:
    """`command`'s compiler and flags without what is a program's own: the
    forced include (the precompiled header stands for it) and `-shared`."""
    runtime = str(runtime_dir() / RUNTIME)
    return [flag for flag in command if flag not in ("-shared", "-include", runtime)]


def _stub(kind: str, header: str, name: str, flags: list[str]) -> Path:
    """`$COCONET_CACHE/emu/KIND-KEY/NAME` (KEY: the hash of the runtime
    headers and `flags`), a one-line file that includes the runtime's
    `header`, written if it is not there: what is built once per flag set
    (`precompiled_header`, `harness_object`) is built from it, beside it."""
    stub = cache_dir() / f"{kind}-{_key(header, flags)}" / name
    if not stub.exists():
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(f'#include "{runtime_dir() / header}"\n')
    return stub


def precompiled_header(command: list[str]) -> Path | None:
    """A directory holding the runtime header `coco_runtime.h` (a one-line
    stub that includes the package's) and its `.gch`, precompiled by g++ with
    `command`'s flags (built once, cached under the hash of the runtime
    headers and the command), or None where the compiler is not g++ or the
    header cannot be precompiled (the build then parses the headers)."""
    if "g++" not in Path(command[0]).name:
        return None
    flags = _shared_flags(command)
    stub = _stub("pch", RUNTIME, RUNTIME, flags)
    failed = build_once(
        stub.with_name(f"{RUNTIME}.gch"),
        lambda out: [*flags, "-x", "c++-header", str(stub), "-o", str(out)],
    )
    return stub.parent if failed is None else None


def harness_object(command: list[str]) -> Path:
    """The harness `coco_emu_harness.h` compiled with `command`'s flags into
    an object file (once, cached under the hash of the runtime headers and
    the command), which every library built with `command` links."""
    flags = _shared_flags(command)
    stub = _stub("harness", HARNESS, "coco_emu_harness.cc", flags)
    target = stub.with_suffix(".o")
    failed = build_once(target, lambda out: [*flags, "-c", str(stub), "-o", str(out)])
    if failed is not None:
        raise EmulatorCompileError(
            f"emulation build of the harness {HARNESS} failed:\n{failed.strip()}",
            failed,
        )
    return target


def emulation_command(command: list[str], source: Path, out: Path) -> list[str]:
    """`command` (the compiler and its flags) building `source` into `out`,
    linking the harness object (`harness_object`) and force-including the
    precompiled runtime header where there is one (g++ reads
    `coco_runtime.h.gch` beside the stub)."""
    harness = harness_object(command)
    pch = precompiled_header(command)
    runtime = str(runtime_dir() / RUNTIME)
    if pch is not None:
        command = [str(pch / RUNTIME) if flag == runtime else flag for flag in command]
    return [
        *command,
        "-x",
        "c++",
        str(source),
        "-x",
        "none",
        str(harness),
        "-o",
        str(out),
    ]


def compile_emulated(cu_source: str, sanitize: str | None = None) -> Path:
    """The shared library built from `cu_source` for the emulation (with
    `sanitize` = "thread" or "address", instrumented), built once per content
    (the runtime headers precompiled and the harness compiled once per flag
    set: `precompiled_header`, `harness_object`)."""
    command = [compiler(), *emulation_flags(sanitize)]
    return build_cached(
        cu_source,
        cache_dir(),
        command,
        f".{sanitize}" if sanitize else "",
        lambda source, out: emulation_command(command, source, out),
        EmulatorCompileError,
        "emulation build",
    )
