"""Hypothesis profiles for the unit tests, chosen with `HYPOTHESIS_PROFILE`.

- `ci` (the default): deterministic draws (`derandomize`), so that a run is
  reproducible, and no deadline (the interpreter's speed varies by machine).
- `dev`: the same budgets with fresh random draws on every run.
- `thorough`: 15 times the examples, random; for hunting bugs locally:
  `HYPOTHESIS_PROFILE=thorough pytest tests/unit/test_pass_properties.py`.

Tests with their own budget scale it by the profile's `max_examples` relative
to hypothesis's default of 100 (`strategies.scaled_examples`).
"""

from __future__ import annotations

import os

# One BLAS thread per test worker (before numpy is first imported): the two
# workers already keep both cores busy, and OpenBLAS's extra threads spinning
# while they wait for work cost CPU time (the model-sized per-peer test: 8.0 s
# of CPU with two threads, 5.4 s with one).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Triton's interpreter where there is no GPU, whichever test imports triton
# first (torch.compile's tests may, before coconet_ir.triton could set it;
# docs/triton.md). With a GPU the kernels compile for it.
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("thorough", deadline=None, print_blob=True, max_examples=1500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# Tests that compile (g++ for the emulation, nvcc) run first: with two workers
# stealing work from each other (`--dist worksteal`, pyproject.toml), a build
# started last would leave one core idle while it finishes. Their order among
# themselves and the order of the rest are kept.
SLOW_FIRST = (
    "backend/test_emu_sanitizers.py",
    "backend/test_emulated_examples.py",
    "backend/test_cuda_printer.py",
    "lowering/test_fused_nvcc.py",
    "lowering/test_tile_collectives.py",
    "lowering/test_fused_emulated.py",
    "lowering/test_per_peer_emulation.py",
    "lowering/test_overlap_emulation.py",
    "lowering/test_fused_reductions_emulated.py",
    "lowering/test_bucket_emulated.py",
    "backend/test_emulated_reductions.py",
    "backend/test_gpu_backend.py",
    "backend/test_emu_runtime.py",
    "lowering/test_embedding_lowering.py",
    "backend/test_cuda_toolchain.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        for index, slow in enumerate(SLOW_FIRST):
            if path.endswith(slow):
                return index
        return len(SLOW_FIRST)

    items.sort(key=rank)  # stable
