"""What the emulation build does once per flag set (`backend/emu/build.py`):
with g++, the force-included `coco_runtime.h` is precompiled and every build
reads the `.gch` instead of parsing the headers; the harness
`coco_emu_harness.h` is compiled into one object file that every library
links (together most of a build's time)."""

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


def built_once(make, file) -> None:
    """`make()` again returns what it did and leaves `file(made)` as it was."""
    made = make()
    built = file(made).stat().st_mtime_ns
    assert make() == made
    assert file(made).stat().st_mtime_ns == built


def test_the_runtime_header_is_precompiled_once_and_used(gxx, tmp_path):
    directory = build.precompiled_header(gxx)
    assert directory is not None and directory.parent == build.cache_dir()
    header = directory / "coco_runtime.h.gch"
    built_once(lambda: build.precompiled_header(gxx), lambda d: d / header.name)
    # g++ -H marks a precompiled header it reads with '!' (an unusable one 'x').
    source = tmp_path / "uses.cu"
    source.write_text('#include "coco_runtime.h"\n')
    command = build.emulation_command(gxx, source, tmp_path / "uses.so")
    shown = subprocess.run(
        [*command, "-H", "-fsyntax-only"], capture_output=True, text=True
    ).stderr
    assert shown.startswith(f"! {header}"), shown[:300]


def test_the_harness_is_compiled_once_and_linked(gxx, tmp_path):
    harness = build.harness_object(gxx)
    assert harness.parent.parent == build.cache_dir()
    built_once(lambda: build.harness_object(gxx), lambda h: h)
    source = tmp_path / "uses.cu"
    source.write_text('#include "coco_runtime.h"\n')
    command = build.emulation_command(gxx, source, tmp_path / "uses.so")
    assert command[-3:] == [str(harness), "-o", str(tmp_path / "uses.so")]
    subprocess.run(command, check=True)
    exported = subprocess.run(
        ["nm", "-D", "--defined-only", str(tmp_path / "uses.so")],
        capture_output=True,
        text=True,
    ).stdout
    assert "coco_emu_create" in exported
