"""The README's two setup commands: `.ci/run` runs exactly them, they write
nothing to fixed paths outside the checkout, and the first one's compile-and-
check part works in a fresh checkout (no `build/` yet)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import EXAMPLES_DIR, ROOT

INSTALL_STEPS = ("python3 -m venv", ". .venv/bin/activate", "pip install")


def setup_commands() -> list[str]:
    """The `sh` blocks of the README's "Setup and run" section."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Setup and run", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_the_readme_has_the_install_and_the_test_command():
    install, tests = setup_commands()
    assert install.startswith("python3 -m venv .venv && ")
    assert "lit -sv tests/filecheck" in tests and "pytest" in tests


def test_ci_runs_exactly_the_readme_commands():
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in setup_commands():
        assert command in ci_lines, command


def test_the_commands_write_inside_the_checkout():
    ignored = (ROOT / ".gitignore").read_text().split()
    for command in setup_commands():
        assert "/tmp" not in command, command
        for path in re.findall(r"(?:-o|tee|--save)\s+(\S+)", command):
            assert not os.path.isabs(path), path
            assert f"{Path(path).parts[0]}/" in ignored, path


def test_the_first_command_works_in_a_fresh_checkout(tmp_path: Path):
    """Its steps after the install, run where there is no build/ yet, with the
    tools of this environment."""
    install, _ = setup_commands()
    steps = [
        step for step in install.split(" && ") if not step.startswith(INSTALL_STEPS)
    ]
    shutil.copytree(EXAMPLES_DIR, tmp_path / "examples")
    tools = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-c", " && ".join(steps)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "static prediction (coconet_ir.analysis): agree" in proc.stdout
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last.startswith("matches the interpreter: ")
    emitted = (tmp_path / "build" / "megatron.cu").read_text()
    assert '#include "coco_runtime.h"' in emitted
