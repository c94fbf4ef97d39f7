"""The CPU emulation of coco_runtime.h (docs/gpu/emulation.md), through the driver:
hand-written kernels and entries (cuda/runtime_kernels.cu) built with g++ and
run on worlds of 2, 4 and 8 ranks, against numpy."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest
from emu_helpers import (
    CUDA_TYPES,
    NCCL_OPS,
    NCCL_TYPES,
    SYMMETRIC_BYTES,
    kernels_source,
    ring_bytes,
)

from coconet_ir.backend.emu import (
    EmulationError,
    EmulatorCompileError,
    EntryCall,
    compile_emulated,
    run_emulated,
)
from coconet_ir.diagnostics import CocoError
from coconet_ir.interpreter.philox import dropout_uniform

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(scope="module")
def lib():
    return compile_emulated(kernels_source())


def per_rank(n: int, make) -> list[list]:
    return [make(r) for r in range(n)]


# ---------------------------------------------------------------------------
# (a) kernels, conversions, stream-ordered memory, shared memory
# ---------------------------------------------------------------------------


def test_elementwise_grid_stride(lib):
    n, count = 2, 1000  # 2 blocks of 64 threads: each thread strides ~8 times
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(count).astype(np.float32) for _ in range(n)]
    ys = [rng.standard_normal(count).astype(np.float32) for _ in range(n)]
    expected = [np.float32(3) * x + y for x, y in zip(xs, ys)]
    outputs, stats = run_emulated(
        lib,
        n,
        [
            EntryCall(
                "coco_scale_add",
                per_rank(n, lambda r: [xs[r], ys[r], np.float32(3), np.int64(count)]),
                outputs={"y": 1},
            )
        ],
    )
    for r in range(n):
        np.testing.assert_array_equal(outputs["y"][r], expected[r])
    assert stats["launches"] == [[1, 0, 0, 0]] * n
    assert stats["kernels"] == {"scale_add": n}


def test_half_and_bfloat16_conversions_round_like_numpy(lib):
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    special = np.array(
        [
            0.0,
            -0.0,
            1.0,
            65504.0,
            65519.99,
            65520.0,
            1e9,
            2.0**-24,
            2.0**-25,
            2.0**-25 * 1.0000001,
            3 * 2.0**-25,
            2.0**-14,
            6.1e-5,
            np.inf,
            -np.inf,
            np.nan,
            1.00048828125,
            1.00146484375,
            3.3895313892515355e38,
        ],
        dtype=np.float32,
    )
    x = np.concatenate([bits.view(np.float32), special])
    count = x.size
    h = np.zeros(count, np.float16)
    b = np.zeros(count, BF16)
    back_h = np.zeros(count, np.float32)
    back_b = np.zeros(count, np.float32)
    outputs, _ = run_emulated(
        lib,
        1,
        [
            EntryCall(
                "coco_convert_halves",
                [[x, h, b, back_h, back_b, np.int64(count)]],
                outputs={"h": 1, "b": 2, "back_h": 3, "back_b": 4},
            )
        ],
    )
    with np.errstate(over="ignore", invalid="ignore"):
        want_h = x.astype(np.float16)
        want_b = x.astype(BF16)
    nan = np.isnan(x)
    got_h, got_b = outputs["h"][0], outputs["b"][0]
    np.testing.assert_array_equal(
        got_h.view(np.uint16)[~nan], want_h.view(np.uint16)[~nan]
    )
    np.testing.assert_array_equal(
        got_b.view(np.uint16)[~nan], want_b.view(np.uint16)[~nan]
    )
    assert np.isnan(got_h[nan].astype(np.float32)).all()
    assert np.isnan(got_b[nan].astype(np.float32)).all()
    np.testing.assert_array_equal(outputs["back_h"][0], want_h.astype(np.float32))
    np.testing.assert_array_equal(outputs["back_b"][0], want_b.astype(np.float32))


def test_stream_ordered_temporary(lib):
    x = np.arange(300, dtype=np.float32)
    y = np.zeros(300, np.float32)
    outputs, _ = run_emulated(
        lib,
        1,
        [EntryCall("coco_twice_via_temp", [[x, y, np.int64(300)]], outputs={"y": 1})],
    )
    np.testing.assert_array_equal(outputs["y"][0], 2 * x)


def test_shared_memory_block_reduction(lib):
    count, blocks = 1000, 3
    x = (np.arange(count) % 7).astype(np.float32)
    partial = np.zeros(blocks, np.float32)
    total = np.full(1, 123.0, np.float32)  # the entry zeroes it first
    outputs, _ = run_emulated(
        lib,
        1,
        [
            EntryCall(
                "coco_block_sum",
                [[x, partial, total, np.int64(count), np.int32(blocks)]],
                outputs={"partial": 1, "total": 2},
            )
        ],
    )
    stride = blocks * 64
    expected = [
        sum(
            x[i]
            for start in range(b * 64, count, stride)
            for i in range(start, min(start + 64, count))
        )
        for b in range(blocks)
    ]
    np.testing.assert_array_equal(outputs["partial"][0], np.array(expected, np.float32))
    assert outputs["total"][0][0] == x.sum()


def test_dynamic_shared_atomics_umulhi_dtype_helpers(lib):
    n = 2
    xs = [np.arange(32, dtype=np.float32) + r for r in range(n)]
    outputs, _ = run_emulated(
        lib,
        n,
        [
            EntryCall(
                "coco_odds_and_ends",
                [
                    [
                        xs[r],
                        np.zeros(32, np.float32),
                        np.array([5, 0], np.int32),
                        np.zeros(1, np.float64),
                        np.zeros(32, np.uint32),
                        np.zeros(32, np.float32),
                    ]
                    for r in range(n)
                ],
                outputs={"reversed": 1, "count": 2, "sum": 3, "high": 4, "ar": 5},
            )
        ],
        symmetric_bytes=SYMMETRIC_BYTES,
    )
    t = np.arange(32, dtype=np.uint64)
    high = ((0x80000000 + t) * (0xFFFFFFFF - t)) >> np.uint64(32)
    for r in range(n):
        np.testing.assert_array_equal(outputs["reversed"][r], xs[r][::-1])
        assert outputs["count"][r].tolist() == [5 + 32, 15]
        assert outputs["sum"][r][0] == xs[r].sum()
        np.testing.assert_array_equal(outputs["high"][r], high.astype(np.uint32))
        np.testing.assert_array_equal(outputs["ar"][r], xs[0] + xs[1])


# ---------------------------------------------------------------------------
# (b) flags: blocks, streams and ranks spin on each other concurrently
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
def test_flag_ping_pong_between_blocks_streams_and_ranks(lib, n):
    rounds, count = 20, 50
    xs = [np.arange(count, dtype=np.float32) + 1000 * r for r in range(n)]
    got = [np.zeros(count, np.float32) for _ in range(n)]
    calls = []
    for repeat in range(2):  # epochs: a second call reuses the same slots
        calls += [
            EntryCall(
                "coco_pingpong_blocks",
                per_rank(
                    n, lambda r: [np.zeros(2 * rounds, np.int32), np.int32(rounds)]
                ),
                outputs={f"blocks{repeat}": 0},
            ),
            EntryCall(
                "coco_pingpong_streams",
                per_rank(
                    n, lambda r: [np.zeros(2 * rounds, np.int32), np.int32(rounds)]
                ),
                outputs={f"streams{repeat}": 0},
            ),
            EntryCall(
                "coco_ring_exchange",
                per_rank(n, lambda r: [xs[r], got[r], np.int64(count)]),
                outputs={f"ring{repeat}": 1},
            ),
        ]
    outputs, stats = run_emulated(
        lib, n, calls, symmetric_bytes=SYMMETRIC_BYTES, watchdog=20
    )
    i = np.arange(1, rounds + 1, dtype=np.int32)
    for repeat in range(2):
        for r in range(n):
            np.testing.assert_array_equal(
                outputs[f"blocks{repeat}"][r], np.stack([i, 10 * i], 1).ravel()
            )
            np.testing.assert_array_equal(
                outputs[f"streams{repeat}"][r], np.stack([i, i + 100], 1).ravel()
            )
            np.testing.assert_array_equal(outputs[f"ring{repeat}"][r], xs[(r - 1) % n])
    bytes_ = np.array(stats["bytes"])
    expected = np.zeros((n, n), np.int64)
    for r in range(n):
        expected[r, (r + 1) % n] = 2 * count * 4
    np.testing.assert_array_equal(bytes_[:, :, 0], expected)
    assert stats["launches"] == [[6, 2, 0, 0]] * n


# ---------------------------------------------------------------------------
# (c) NCCL against numpy, (h) its statistics
# ---------------------------------------------------------------------------


def reduce_like_nccl(values: list[np.ndarray], op: str) -> np.ndarray:
    """Rank order, in f32 for halves (then rounded), wrapping int32."""
    dtype = values[0].dtype
    wide = (
        np.float32
        if dtype in (np.float16, BF16)
        else (np.int64 if dtype == np.int32 else dtype)
    )
    acc = values[0].astype(wide)
    for v in values[1:]:
        v = v.astype(wide)
        acc = {
            "sum": np.add,
            "prod": np.multiply,
            "max": np.maximum,
            "min": np.minimum,
        }[op](acc, v).astype(wide)
    return acc.astype(dtype)


def draw(rng, dtype, shape):
    if dtype == np.int32:
        return rng.integers(-50, 50, shape).astype(np.int32)
    return rng.uniform(0.5, 1.5, shape).astype(dtype)


DTYPES = [
    np.dtype(np.float32),
    np.dtype(np.float16),
    BF16,
    np.dtype(np.float64),
    np.dtype(np.int32),
]


@pytest.mark.parametrize("n", [2, 4, 8])
def test_nccl_collectives_against_numpy(lib, n):
    rng = np.random.default_rng(n)
    block = 3
    calls, expected = [], {}
    for dtype in DTYPES:
        code = np.int32(NCCL_TYPES[dtype])
        for op in NCCL_OPS:
            xs = [draw(rng, dtype, block * n) for _ in range(n)]
            name = f"all_reduce/{dtype}/{op}"
            calls.append(
                EntryCall(
                    "coco_nccl_all_reduce",
                    per_rank(
                        n,
                        lambda r: [
                            xs[r],
                            np.zeros(block * n, dtype),
                            np.int64(block * n),
                            code,
                            np.int32(NCCL_OPS[op]),
                        ],
                    ),
                    outputs={name: 1},
                )
            )
            expected[name] = [reduce_like_nccl(xs, op)] * n
            xs2 = [draw(rng, dtype, block * n) for _ in range(n)]
            name = f"reduce_scatter/{dtype}/{op}"
            calls.append(
                EntryCall(
                    "coco_nccl_reduce_scatter",
                    per_rank(
                        n,
                        lambda r: [
                            xs2[r],
                            np.zeros(block, dtype),
                            np.int64(block),
                            code,
                            np.int32(NCCL_OPS[op]),
                        ],
                    ),
                    outputs={name: 1},
                )
            )
            total = reduce_like_nccl(xs2, op)
            expected[name] = [total[r * block : (r + 1) * block] for r in range(n)]
        xs = [draw(rng, dtype, block) for _ in range(n)]
        name = f"all_gather/{dtype}"
        calls.append(
            EntryCall(
                "coco_nccl_all_gather",
                per_rank(
                    n,
                    lambda r: [
                        xs[r],
                        np.zeros(block * n, dtype),
                        np.int64(block),
                        code,
                    ],
                ),
                outputs={name: 1},
            )
        )
        expected[name] = [np.concatenate(xs)] * n
        root = n - 1
        xs3 = [draw(rng, dtype, block) for _ in range(n)]
        name = f"broadcast/{dtype}"
        calls.append(
            EntryCall(
                "coco_nccl_broadcast",
                per_rank(
                    n,
                    lambda r: [
                        xs3[r],
                        np.zeros(block, dtype),
                        np.int64(block),
                        code,
                        np.int32(root),
                    ],
                ),
                outputs={name: 1},
            )
        )
        expected[name] = [xs3[root]] * n
    xs = [np.arange(block * n, dtype=np.float32) + 100 * r for r in range(n)]
    calls.append(
        EntryCall(
            "coco_nccl_all_to_all",
            per_rank(
                n, lambda r: [xs[r], np.zeros(block * n, np.float32), np.int64(block)]
            ),
            outputs={"all_to_all": 1},
        )
    )
    expected["all_to_all"] = [
        np.concatenate([xs[p][r * block : (r + 1) * block] for p in range(n)])
        for r in range(n)
    ]
    # in place: y = x
    inplace = [np.full(4, r + 1, np.float32) for r in range(n)]
    calls.append(
        EntryCall(
            "coco_nccl_all_reduce",
            per_rank(
                n,
                lambda r: [
                    inplace[r],
                    inplace[r],
                    np.int64(4),
                    np.int32(7),
                    np.int32(0),
                ],
            ),
            outputs={"in_place": 1},
        )
    )
    expected["in_place"] = [np.full(4, n * (n + 1) / 2, np.float32)] * n

    outputs, stats = run_emulated(lib, n, calls)
    for name, want in expected.items():
        for r in range(n):
            np.testing.assert_array_equal(
                outputs[name][r], want[r], err_msg=f"{name} rank {r}"
            )
    per_call = len(NCCL_OPS) * 2 + 2
    assert stats["nccl_calls"] == [[len(DTYPES) * per_call + 1, 2 * n, 0, 0]] * n


@pytest.mark.parametrize(
    "entry, kind, extra",
    [
        ("coco_nccl_all_reduce", "all_reduce", [np.int32(0)]),
        ("coco_nccl_reduce_scatter", "reduce_scatter", [np.int32(0)]),
        ("coco_nccl_all_gather", "all_gather", []),
        ("coco_nccl_broadcast", "broadcast", [np.int32(1)]),
    ],
)
def test_nccl_statistics_follow_the_ring(lib, entry, kind, extra):
    n, count = 4, 24  # f32: 96-byte blocks
    in_count = count * n if kind == "reduce_scatter" else count
    out_count = count * n if kind == "all_gather" else count
    calls = [
        EntryCall(
            entry,
            per_rank(
                n,
                lambda r: [
                    np.ones(in_count, np.float32),
                    np.zeros(out_count, np.float32),
                    np.int64(count),
                    np.int32(7),
                    *extra,
                ],
            ),
        )
    ]
    _, stats = run_emulated(lib, n, calls)
    payload = 4 * (count * n if kind in ("reduce_scatter", "all_gather") else count)
    bytes_ = np.array(stats["bytes"])
    np.testing.assert_array_equal(bytes_[:, :, 0], ring_bytes(kind, n, payload, root=1))
    assert not bytes_[:, :, 1:].any()


def test_send_recv_across_two_stages(lib):
    n, count = 2, 10
    xs = [np.arange(count, dtype=np.float32) * (r + 1) for r in range(n)]
    calls = [
        EntryCall(
            "coco_send_to",
            per_rank(n, lambda r: [xs[r], np.int64(count), np.int32(1)]),
            stage=0,
        ),
        EntryCall(
            "coco_recv_from",
            per_rank(
                n, lambda r: [np.zeros(count, np.float32), np.int64(count), np.int32(0)]
            ),
            stage=1,
            outputs={"received": 0},
        ),
    ]
    outputs, stats = run_emulated(lib, n, calls, num_stages=2)
    for r in range(n):
        np.testing.assert_array_equal(outputs["received"][r], xs[r])
    bytes_ = np.array(stats["bytes"])[:, :, 0]
    expected = np.zeros((2 * n, 2 * n), np.int64)
    for r in range(n):
        expected[r, n + r] = count * 4
    np.testing.assert_array_equal(bytes_, expected)
    assert stats["nccl_calls"] == [[1, 0, 0, 0]] * (2 * n)


# ---------------------------------------------------------------------------
# (d) cuBLAS, row-major through the column-major trick
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16])
def test_gemm_row_major(lib, dtype):
    rng = np.random.default_rng(3)
    m, n_, k = 5, 7, 11
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n_)).astype(dtype)
    c0 = rng.standard_normal((m, n_)).astype(np.float32)
    code = np.int32(CUDA_TYPES[dtype])
    f32 = np.int32(CUDA_TYPES[np.dtype(np.float32)])
    calls = [
        EntryCall(
            "coco_gemm",
            [
                [
                    a,
                    b,
                    np.zeros((m, n_), dtype),
                    np.int32(m),
                    np.int32(n_),
                    np.int32(k),
                    code,
                    code,
                    np.float32(0),
                ]
            ],
            outputs={"c": 2},
        ),
        EntryCall(
            "coco_gemm",
            [
                [
                    a,
                    b,
                    c0.copy(),
                    np.int32(m),
                    np.int32(n_),
                    np.int32(k),
                    code,
                    f32,
                    np.float32(1),
                ]
            ],
            outputs={"c_acc": 2},
        ),
    ]
    outputs, stats = run_emulated(lib, 1, calls)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    tolerance = 1e-5 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(
        outputs["c"][0].astype(np.float64), exact, rtol=tolerance, atol=tolerance
    )
    assert outputs["c"][0].dtype == dtype
    np.testing.assert_allclose(outputs["c_acc"][0], exact + c0, rtol=1e-5, atol=1e-5)
    assert stats["gemms"] == [[2, 0, 0, 0]]


def test_gemm_strided_batched_transposed(lib):
    rng = np.random.default_rng(4)
    batch, m, n_, k = 3, 4, 6, 5
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, n_, k)).astype(np.float32)
    outputs, _ = run_emulated(
        lib,
        1,
        [
            EntryCall(
                "coco_gemm_batched_bt",
                [
                    [
                        a,
                        b,
                        np.zeros((batch, m, n_), np.float32),
                        np.int32(batch),
                        np.int32(m),
                        np.int32(n_),
                        np.int32(k),
                    ]
                ],
                outputs={"c": 2},
            )
        ],
    )
    np.testing.assert_allclose(
        outputs["c"][0], a @ b.transpose(0, 2, 1), rtol=1e-5, atol=1e-5
    )


# ---------------------------------------------------------------------------
# (f) Philox, bit for bit with the interpreter's
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seed, first", [(0, 0), (7, 1000), (2**40 + 3, 2**32 - 500), (2**64 - 1, 2**45)]
)
def test_philox_matches_the_interpreter(lib, seed, first):
    count = 2000
    outputs, _ = run_emulated(
        lib,
        1,
        [
            EntryCall(
                "coco_philox",
                [
                    [
                        np.zeros(count, np.float32),
                        np.int64(count),
                        np.uint64(seed),
                        np.uint64(first),
                    ]
                ],
                outputs={"u": 0},
            )
        ],
    )
    expected = dropout_uniform(seed, np.arange(first, first + count, dtype=np.uint64))
    np.testing.assert_array_equal(outputs["u"][0].astype(np.float64), expected)


# ---------------------------------------------------------------------------
# (g) the watchdog, errors, the cache
# ---------------------------------------------------------------------------


def test_watchdog_names_the_stuck_wait(lib):
    start = time.monotonic()
    with pytest.raises(EmulationError) as caught:
        run_emulated(lib, 2, [EntryCall("coco_wait_forever", [[], []])], watchdog=1)
    assert time.monotonic() - start < 30
    message = str(caught.value)
    assert "watchdog" in message
    assert "stage 0, stream 2" in message
    assert "kernel 'wait_forever'" in message
    assert "slot 7 of the signal pad of rank" in message
    assert "to reach 1099511627776; it holds 0" in message
    assert caught.value.returncode == 3


def test_watchdog_names_an_unmatched_receive(lib):
    calls = [
        EntryCall(
            "coco_recv_from",
            [[np.zeros(4, np.float32), np.int64(4), np.int32(0)]],
            stage=1,
        )
    ]
    with pytest.raises(
        EmulationError, match=r"ncclRecv #0 from rank 0 of the pipeline"
    ) as caught:
        run_emulated(lib, 1, calls, num_stages=2, watchdog=1)
    assert "rank 0 of stage 1, stream 0" in str(caught.value)


def test_failing_entry_reports_the_call(lib):
    with pytest.raises(
        EmulationError,
        match=r"coco_bad_launch on rank 0 of stage 0 returned status 1: "
        r".*COCO_LAUNCH\(twice\) failed: invalid configuration",
    ):
        run_emulated(
            lib, 1, [EntryCall("coco_bad_launch", [[np.zeros(1, np.float32)]])]
        )


def test_compile_error_is_a_coco_error():
    with pytest.raises(EmulatorCompileError, match="not_a_type") as caught:
        compile_emulated('#include "coco_runtime.h"\nnot_a_type x;\n')
    assert isinstance(caught.value, CocoError)


def test_builds_are_cached_by_content(lib, tmp_path, monkeypatch):
    from coconet_ir.backend.emu.build import cache_dir

    assert compile_emulated(kernels_source()) == lib
    # A fresh cache, but the harness objects and precompiled headers (built
    # once per flag set: test_emu_build_cache) linked from the run's.
    (tmp_path / "emu").mkdir()
    for shared in [*cache_dir().glob("harness-*"), *cache_dir().glob("pch-*")]:
        (tmp_path / "emu" / shared.name).symlink_to(shared)
    monkeypatch.setenv("COCONET_CACHE", str(tmp_path))
    tiny = (
        '#include "coco_runtime.h"\n'
        'extern "C" int coco_nothing(coco_context *) { return 0; }\n'
    )
    first = compile_emulated(tiny)
    assert first.parent == tmp_path / "emu"
    built = first.stat().st_mtime_ns
    assert compile_emulated(tiny) == first
    assert first.stat().st_mtime_ns == built
    assert first.name != lib.name
