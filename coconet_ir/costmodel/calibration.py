"""The measurements the cost model is checked against (docs/performance.md,
"Calibration"): each case is a published number, the model's prediction of
it, and its source. `fitted` marks the cases a constant of
`machines.Efficiency` was fitted to (they check the formula around the fit);
the others are held out. tests/unit/costmodel/test_calibration.py keeps every
case within `TOLERANCE`; coconet-bench prints them with its predictions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel.machines import machine

TOLERANCE = 0.15
"""How far a prediction may drift from its measurement (relative)."""

GIB = 2**30

# FLUX (Chang et al. 2024, arXiv:2406.06858), 8xH800, TP = 8, bf16:
# M = 4096, K = 12288, N = 49152.
FLUX_M, FLUX_K, FLUX_N, FLUX_TP = 4096, 12288, 49152, 8
FLUX_ACTIVATION_BYTES = FLUX_M * FLUX_K * 2
"""The gathered input of AG + GEMM and the reduce-scattered output of
GEMM + RS: both M x 12288 bf16."""


def bf16_matmul(m: int, n: int, k: int) -> f.MatmulShape:
    return f.MatmulShape(m, n, k, element_type="bf16", element_bytes=2)


def flux_times(n: int, k: int) -> tuple[float, float]:
    """A FLUX case on 8xH800: the times of its GEMM (M x `k` times `k` x
    `n`) and of its collective of the M x K activations (gathered before the
    GEMM, or its partials reduce-scattered after it)."""
    h800 = machine("h800x8")
    gemm = f.matmul_s(bf16_matmul(FLUX_M, n, k), h800)
    return gemm, f.gather_scatter_s(FLUX_ACTIVATION_BYTES, FLUX_TP, h800)


def all_gather_gemm() -> tuple[float, float]:
    """FLUX's AG + GEMM: gather M x K, multiply by K x N/TP; the (GEMM,
    all-gather) times."""
    return flux_times(FLUX_N // FLUX_TP, FLUX_K)


def gemm_reduce_scatter() -> tuple[float, float]:
    """FLUX's GEMM + RS: M x N/TP times N/TP x K, the M x K partials
    reduce-scattered (FLUX's GEMM + RS case has n = 12288, k = 49152); the
    (GEMM, reduce-scatter) times."""
    return flux_times(FLUX_K, FLUX_N // FLUX_TP)


def bus_bandwidth(name: str) -> float:
    """nccl-tests' busbw of an 8 GiB all-reduce on 8 GPUs: 2(N-1)/N S / t."""
    size = 8 * GIB
    t = f.all_reduce_s(size, 8, machine(name))
    return 2 * 7 / 8 * size / t


def gemm_flops(name: str, n: int) -> float:
    """The FLOP/s of an n³ bf16 matmul."""
    shape = bf16_matmul(n, n, n)
    return shape.flops / f.matmul_s(shape, machine(name))


@dataclass(frozen=True)
class Case:
    """One published measurement and the model's prediction of it."""

    name: str
    """What was measured, with its unit."""
    predict: Callable[[], float]
    measured: float
    source: str
    fitted: bool
    """A constant was fitted to this measurement (not a held-out check)."""

    def error(self) -> float:
        """The prediction's relative error: predicted / measured - 1."""
        return self.predict() / self.measured - 1


def flux_cases(
    name: str,
    times: Callable[[], tuple[float, float]],
    separate_ms: float,
    overlapped_ms: float,
    *,
    fitted: bool,
) -> tuple[Case, Case]:
    """FLUX's two measurements of `name` (H800, TP=8): its GEMM and
    collective (`times`) as separate kernels, one after the other (held
    out), and as one overlapped kernel (`fused_overlap_s`; `fitted` when a
    constant was fitted to it)."""
    source = "FLUX, H800 TP=8"
    return (
        Case(
            f"FLUX {name}, separate kernels (ms)",
            lambda: sum(times()) * 1e3,
            separate_ms,
            source,
            fitted=False,
        ),
        Case(
            f"FLUX {name}, overlapped kernel (ms)",
            lambda: f.fused_overlap_s(*times(), machine("h800x8")) * 1e3,
            overlapped_ms,
            source,
            fitted=fitted,
        ),
    )


CASES: tuple[Case, ...] = (
    Case(
        "all-reduce busbw 8xA100 (GB/s)",
        lambda: bus_bandwidth("a100x8") / 1e9,
        240.0,
        "nccl-tests reference, 230-250 GB/s",
        fitted=True,
    ),
    Case(
        "all-reduce busbw 8xH100 (GB/s)",
        lambda: bus_bandwidth("h100x8") / 1e9,
        370.0,
        "nccl-tests all_reduce_perf at large sizes",
        fitted=False,
    ),
    Case(
        "bf16 GEMM 8192³ on H100 (TFLOP/s)",
        lambda: gemm_flops("h100x8", 8192) / 1e12,
        795.0,
        "cuBLAS, pranjalssh/fast.cu README",
        fitted=True,
    ),
    Case(
        "bf16 GEMM 4096³ on H100 (TFLOP/s)",
        lambda: gemm_flops("h100x8", 4096) / 1e12,
        716.0,
        "cuBLAS, pranjalssh/fast.cu README",
        fitted=False,
    ),
    *flux_cases("AG + GEMM", all_gather_gemm, 1.429, 0.957, fitted=True),
    *flux_cases("GEMM + RS", gemm_reduce_scatter, 1.408, 0.932, fitted=False),
)
"""Every case, by the order of docs/performance.md's calibration table."""
