"""coconet-run's exit codes when a check disagrees, without compiling
anything: the emulation is replaced by the interpreter's own run, exact or
perturbed (issue 25's mutation run: `--backend emu --check` exiting 0 on a
disagreement went unnoticed, as no test makes the emulation disagree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coconet_ir import emulate as emulation
from coconet_ir import parse
from coconet_ir.diagnostics import CocoError
from coconet_ir.interpreter import interpret
from coconet_ir.tools import coconet_run

L, R = "!coco.tensor<8xf32, local>", "!coco.tensor<8xf32, replicated>"
PROGRAM = f"""func.func @f(%a: {L}) -> {R} {{
  %r = coco.all_reduce %a reduction = sum : {L} -> {R}
  func.return %r : {R}
}}
"""


def exit_code(argv: list[str]) -> int:
    try:
        coconet_run.main(argv)
    except SystemExit as done:
        return int(done.code or 0)
    return 0


@pytest.mark.parametrize(("perturbed", "code"), [(False, 0), (True, 1)])
def test_emu_check_exits_1_when_it_disagrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, perturbed: bool, code: int
) -> None:
    def fake_emulate(module, world, *, seed=0, entry=None, **_):
        result = interpret(module, world, seed=seed, entry=entry)
        if perturbed:
            for output in result.outputs.values():
                output.value[...] += 1
        return result

    monkeypatch.setattr(emulation, "emulate", fake_emulate)
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    argv = [str(path), "--backend", "emu", "--check", "--world", "4"]
    assert exit_code(argv) == code


@pytest.mark.parametrize(
    ("devices", "backend", "code"),
    [
        ("0,0,0,0", "cuda", 0),
        ("0,0,0,0", "emu", 2),
        ("0,x", "cuda", 2),
        ("-1", "cuda", 2),
    ],
)
def test_devices_reach_the_gpu_run_with_cuda_only(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    devices: str,
    backend: str,
    code: int,
) -> None:
    """`--devices 0,0,0,0` (four ranks sharing GPU 0) is handed to the GPU run
    as it is; with another backend, or not a list of device numbers, it is
    bad usage (exit 2) before any work."""
    seen: list[object] = []

    def fake_emulate(module, world, *, seed=0, entry=None, devices=None, **_):
        seen.append(devices)
        return interpret(module, world, seed=seed, entry=entry)

    monkeypatch.setattr(emulation, "emulate", fake_emulate)
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    argv = [str(path), "--backend", backend, "--world", "4", "--devices", devices]
    assert exit_code(argv) == code
    assert seen == ([[0, 0, 0, 0]] if code == 0 else [])


def test_emulate_refuses_devices_off_the_gpu() -> None:
    with pytest.raises(CocoError, match="cuda backend only"):
        emulation.emulate(parse(PROGRAM), 2, devices=[0, 0])
