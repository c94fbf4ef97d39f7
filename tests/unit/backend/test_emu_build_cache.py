"""The emulation build's precompiled runtime header (`backend/emu/build.py`):
with g++, the force-included harness `coco_emu_harness.h` (which includes
`coco_runtime.h`) is precompiled once per flag set and every build reads the
`.gch` instead of parsing the headers (most of a build's time)."""

from __future__ import annotations

import subprocess

import pytest

from coconet_ir.backend.emu import build


@pytest.fixture
def gxx():
    """The plain emulation build's command (its header is the one the other
    tests' builds share, in the run's cache)."""
    if "g++" not in build.compiler():
        pytest.skip("the precompiled header is built by g++ only")
    return [build.compiler(), *build.emulation_flags()]


def test_the_runtime_header_is_precompiled_once_and_used(gxx, tmp_path):
    directory = build.precompiled_header(gxx)
    assert directory is not None and directory.parent == build.cache_dir()
    header = directory / "coco_emu_harness.h.gch"
    built = header.stat().st_mtime_ns
    assert build.precompiled_header(gxx) == directory
    assert header.stat().st_mtime_ns == built
    # g++ -H marks a precompiled header it reads with '!' (an unusable one 'x').
    source = tmp_path / "uses.cu"
    source.write_text('#include "coco_runtime.h"\n')
    command = build.emulation_command(gxx, source, tmp_path / "uses.so")
    shown = subprocess.run(
        [*command, "-H", "-fsyntax-only"], capture_output=True, text=True
    ).stderr
    assert shown.startswith(f"! {header}"), shown[:300]
