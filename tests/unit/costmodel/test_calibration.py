"""The cost model against published measurements (docs/performance.md,
"Calibration"; the cases and their sources are in
coconet_ir/costmodel/calibration.py). Each check fails when the model drifts
more than ±15% from the measurement; `fitted` marks the ones a constant was
fitted to (they check the formula around the fit), the others are held out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel import machine
from coconet_ir.costmodel.calibration import (
    CASES,
    GIB,
    TOLERANCE,
    Case,
    all_gather_gemm,
)

BY_NAME = {case.name: case for case in CASES}


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_model_stays_within_15_percent_of_the_measurement(name: str) -> None:
    case: Case = BY_NAME[name]
    value = case.predict()
    error = case.error()
    assert abs(error) <= TOLERANCE, (
        f"{case.name}: model {value:.3f} vs measured {case.measured} "
        f"({case.source}): {error:+.1%}, beyond ±{TOLERANCE:.0%}"
    )


def test_a_model_without_wave_quantization_or_contention_would_be_caught() -> None:
    """The checks bite: dropping the overlap interference (a perfect overlap)
    or the NCCL link efficiency moves a case beyond the tolerance."""
    fused = BY_NAME["FLUX AG + GEMM, overlapped kernel (ms)"].measured
    busbw_h100 = BY_NAME["all-reduce busbw 8xH100 (GB/s)"].measured
    h800 = machine("h800x8")
    perfect = replace(h800, efficiency=replace(h800.efficiency, overlap_interference=0))
    gemm, comm = all_gather_gemm()
    assert abs(f.fused_overlap_s(gemm, comm, perfect) * 1e3 / fused - 1) > TOLERANCE
    h100 = machine("h100x8")
    ideal = replace(h100, efficiency=replace(h100.efficiency, link=1.0))
    busbw = 2 * 7 / 8 * 8 * GIB / f.all_reduce_s(8 * GIB, 8, ideal) / 1e9
    assert abs(busbw / busbw_h100 - 1) > TOLERANCE
