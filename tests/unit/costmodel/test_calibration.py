"""The cost model against published measurements (docs/performance.md,
"Calibration"). Each check fails when the model drifts more than ±15% from
the measurement; `FITTED` marks the ones a constant was fitted to (they check
the formula around the fit), the others are held out."""

from __future__ import annotations

import pytest

from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel import machine

TOLERANCE = 0.15

GIB = 2**30
BF16 = {"element_type": "bf16", "element_bytes": 2}

# FLUX (Chang et al. 2024, arXiv:2406.06858), 8xH800, TP = 8, bf16:
# M = 4096, K = 12288, N = 49152.
FLUX_M, FLUX_K, FLUX_N, TP = 4096, 12288, 49152, 8
FLUX_ACTIVATION_BYTES = FLUX_M * FLUX_K * 2
"""The gathered input of AG + GEMM and the reduce-scattered output of
GEMM + RS: both M x 12288 bf16."""


def all_gather_gemm() -> tuple[float, float]:
    """FLUX's AG + GEMM: gather M x K, multiply by K x N/TP."""
    h800 = machine("h800x8")
    gemm = f.matmul_s(f.MatmulShape(FLUX_M, FLUX_N // TP, FLUX_K, **BF16), h800)
    return gemm, f.gather_scatter_s(FLUX_ACTIVATION_BYTES, TP, h800)


def gemm_reduce_scatter() -> tuple[float, float]:
    """FLUX's GEMM + RS: M x N/TP times N/TP x K, the M x K partials
    reduce-scattered (FLUX's GEMM + RS case has n = 12288, k = 49152)."""
    h800 = machine("h800x8")
    gemm = f.matmul_s(f.MatmulShape(FLUX_M, FLUX_K, FLUX_N // TP, **BF16), h800)
    return gemm, f.gather_scatter_s(FLUX_ACTIVATION_BYTES, TP, h800)


def bus_bandwidth(name: str) -> float:
    """nccl-tests' busbw of an 8 GiB all-reduce on 8 GPUs: 2(N-1)/N S / t."""
    size = 8 * GIB
    t = f.all_reduce_s(size, 8, machine(name))
    return 2 * 7 / 8 * size / t


def gemm_flops(name: str, n: int) -> float:
    shape = f.MatmulShape(n, n, n, **BF16)
    return shape.flops / f.matmul_s(shape, machine(name))


CASES = {
    # name: (predicted, measured, source, fitted)
    "all-reduce busbw 8xA100 (GB/s)": (
        lambda: bus_bandwidth("a100x8") / 1e9,
        240.0,
        "nccl-tests reference, 230-250 GB/s",
        True,
    ),
    "all-reduce busbw 8xH100 (GB/s)": (
        lambda: bus_bandwidth("h100x8") / 1e9,
        370.0,
        "nccl-tests all_reduce_perf at large sizes",
        False,
    ),
    "bf16 GEMM 8192³ on H100 (TFLOP/s)": (
        lambda: gemm_flops("h100x8", 8192) / 1e12,
        795.0,
        "cuBLAS, pranjalssh/fast.cu README",
        True,
    ),
    "bf16 GEMM 4096³ on H100 (TFLOP/s)": (
        lambda: gemm_flops("h100x8", 4096) / 1e12,
        716.0,
        "cuBLAS, pranjalssh/fast.cu README",
        False,
    ),
    "FLUX AG + GEMM, separate kernels (ms)": (
        lambda: sum(all_gather_gemm()) * 1e3,
        1.429,
        "FLUX, H800 TP=8",
        False,
    ),
    "FLUX AG + GEMM, overlapped kernel (ms)": (
        lambda: f.fused_overlap_s(*all_gather_gemm(), machine("h800x8")) * 1e3,
        0.957,
        "FLUX, H800 TP=8",
        True,
    ),
    "FLUX GEMM + RS, separate kernels (ms)": (
        lambda: sum(gemm_reduce_scatter()) * 1e3,
        1.408,
        "FLUX, H800 TP=8",
        False,
    ),
    "FLUX GEMM + RS, overlapped kernel (ms)": (
        lambda: f.fused_overlap_s(*gemm_reduce_scatter(), machine("h800x8")) * 1e3,
        0.932,
        "FLUX, H800 TP=8",
        False,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_model_stays_within_15_percent_of_the_measurement(case: str) -> None:
    predicted, measured, source, _ = CASES[case]
    value = predicted()
    error = value / measured - 1
    assert abs(error) <= TOLERANCE, (
        f"{case}: model {value:.3f} vs measured {measured} ({source}): "
        f"{error:+.1%}, beyond ±{TOLERANCE:.0%}"
    )


def test_a_model_without_wave_quantization_or_contention_would_be_caught() -> None:
    """The checks bite: dropping the overlap interference (a perfect overlap)
    or the NCCL link efficiency moves a case beyond the tolerance."""
    from dataclasses import replace

    h800 = machine("h800x8")
    perfect = replace(h800, efficiency=replace(h800.efficiency, overlap_interference=0))
    gemm, comm = all_gather_gemm()
    assert abs(f.fused_overlap_s(gemm, comm, perfect) * 1e3 / 0.957 - 1) > TOLERANCE
    h100 = machine("h100x8")
    ideal = replace(h100, efficiency=replace(h100.efficiency, link=1.0))
    busbw = 2 * 7 / 8 * 8 * GIB / f.all_reduce_s(8 * GIB, 8, ideal) / 1e9
    assert abs(busbw / 370 - 1) > TOLERANCE
