"""benchmarks/compile_time.py runs: every row (parse, each step of
coco-optimize, the lowering, the emission, the full pipeline) on small
programs of each kind, so that a change to coco-optimize's steps or the
driver does not leave the benchmark broken until someone measures."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_every_row_runs_on_small_programs() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "compile_time.py"),
            "--program",
            "sgd",
            "adam",
            "megatron",
            "--ops",
            "60",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "`coco-fuse`" in proc.stdout
    assert "**full / parse + print**" in proc.stdout
