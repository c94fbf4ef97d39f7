"""Build an emitted `.cu` into a shared library for the CPU emulation.

`g++ -std=c++20 -O1 -fPIC -shared -pthread -I <runtime_dir> -include
<runtime_dir>/coco_emu_harness.h -x c++` (the harness the driver calls: world
creation, contexts, statistics), cached by the hash of the source, the
runtime headers, the compiler and the flags under `$COCONET_CACHE/emu`
(default `~/.cache/coconet-ir/emu`).

With g++ the runtime headers are parsed once per flag set: the harness (which
includes `coco_runtime.h`) is precompiled (`coco_emu_harness.h.gch`, cached
under the same kind of key) and force-included from there; parsing the
headers is most of a build. g++ checks that a `.gch` was built with
compatible flags and, where it was not, reads the headers themselves, so the
library is the same either way.
"""

from __future__ import annotations

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
HARNESS = "coco_emu_harness.h"
"""The emulation's harness, which every emulated build includes."""
SANITIZER_FLAGS = {
    "thread": ("-fsanitize=thread", "-g"),
    "address": ("-fsanitize=address", "-fno-omit-frame-pointer", "-g"),
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
        str(runtime_dir() / HARNESS),
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
    if not source.exists():
        source.write_text(cu_source)
    with tempfile.NamedTemporaryFile(
        dir=directory, prefix=f".{key}", suffix=".so", delete=False
    ) as temporary:
        partial = Path(temporary.name)
    try:
        result = subprocess.run(
            command_for(source, partial), capture_output=True, text=True
        )
        if result.returncode != 0:
            raise error(
                f"{what} of {source} failed:\n{result.stderr.strip()}",
                result.stderr,
            )
        os.replace(partial, library)
    finally:
        partial.unlink(missing_ok=True)
    return library


def precompiled_header(command: list[str]) -> Path | None:
    """A directory holding the harness `coco_emu_harness.h` (a one-line stub
    that includes the runtime's) and its `.gch`, precompiled by g++ with
    `command`'s flags (built once, cached under the hash of the runtime
    headers and the command), or None where the compiler is not g++ or the
    header cannot be precompiled (the build then parses the headers)."""
    if "g++" not in Path(command[0]).name:
        return None
    harness = str(runtime_dir() / HARNESS)
    flags = [
        flag for flag in command[1:] if flag not in ("-shared", "-include", harness)
    ]
    directory = cache_dir() / f"pch-{_key(HARNESS, [command[0], *flags])}"
    header = directory / f"{HARNESS}.gch"
    if header.exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    stub = directory / HARNESS
    stub.write_text(f'#include "{harness}"\n')
    with tempfile.NamedTemporaryFile(
        dir=directory, prefix=".", suffix=".gch", delete=False
    ) as temporary:
        partial = Path(temporary.name)
    try:
        result = subprocess.run(
            [command[0], *flags, "-x", "c++-header", str(stub), "-o", str(partial)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            return None
        os.replace(partial, header)
    finally:
        partial.unlink(missing_ok=True)
    return directory


def emulation_command(command: list[str], source: Path, out: Path) -> list[str]:
    """`command` (the compiler and its flags) building `source` into `out`,
    force-including the precompiled harness where there is one (g++ reads
    `coco_emu_harness.h.gch` beside the stub)."""
    pch = precompiled_header(command)
    harness = str(runtime_dir() / HARNESS)
    if pch is not None:
        command = [str(pch / HARNESS) if flag == harness else flag for flag in command]
    return [*command, "-x", "c++", str(source), "-o", str(out)]


def compile_emulated(cu_source: str, sanitize: str | None = None) -> Path:
    """The shared library built from `cu_source` for the emulation (with
    `sanitize` = "thread" or "address", instrumented), built once per content
    (with the runtime headers precompiled, `precompiled_header`)."""
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
