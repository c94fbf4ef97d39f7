"""The fused collective kernel end to end: lowered, printed as CUDA C, built
for the CPU emulation and run on N ranks, three calls back to back (epochs
carry over, no host synchronization between them), against the interpreter;
the bytes the emulator counts against the static prediction
(analysis/traffic.py); ThreadSanitizer and AddressSanitizer runs."""

from __future__ import annotations

import shutil

import fused_emulation
import numpy as np
import pytest
from fused_emulation import cuda_source, emulate, peer_bytes
from helpers import T, example, load_example
from xdsl.dialects import gpu, scf
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.analysis.traffic import fused_all_reduce_bytes, fused_send_bytes
from coconet_ir.backend.emu import EmulationError
from coconet_ir.dialects.coco import FusionOp, OverlapOp
from coconet_ir.dialects.coco_gpu import GridBlocksOp, WaitSignalOp

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

CALLS = 3


def optimized(name: str) -> ModuleOp:
    return cc.Pipeline("coco-optimize{overlap_mode=chunks}")(example(name))


def predicted(module: ModuleOp, world: int) -> tuple[int, int]:
    """Bytes one rank stores into its peers, and sends to the next stage, per
    call: every fusion's prediction times the chunks of an enclosing
    overlap."""
    peers = sends = 0
    for op in module.walk():
        if not isinstance(op, FusionOp):
            continue
        parent = op.parent_op()
        times = parent.chunk_count if isinstance(parent, OverlapOp) else 1
        peers += times * fused_all_reduce_bytes(op, world)
        sends += times * fused_send_bytes(op, world)
    return peers, sends


def assert_matches(run, exact: bool) -> None:
    for expected, actual in zip(run.expected, run.actual, strict=True):
        assert expected.keys() == actual.keys()
        for key, want in expected.items():
            got = actual[key]
            assert got.shape == want.shape, key
            if exact:
                np.testing.assert_array_equal(got, want, err_msg=key)
            else:
                np.testing.assert_allclose(
                    got.astype(np.float64),
                    want.astype(np.float64),
                    rtol=2e-5,
                    atol=1e-5,
                )


def assert_traffic(run, module: ModuleOp, world: int, stages: int = 1) -> None:
    """Every rank stores exactly the predicted bytes into each peer (the
    fused kernels are the only intra-stage traffic of these programs)."""
    peers, sends = predicted(module, world)
    within = peer_bytes(run.stats, world)
    for r in range(world):
        assert within[r].sum() == CALLS * peers
        for p in range(world):
            expected = 0 if p == r else CALLS * peers // (world - 1)
            assert within[r, p] == expected
    if stages > 1:
        everything = np.array(run.stats["bytes"]).sum(axis=-1)
        for r in range(world):
            assert everything[r, world + r] == CALLS * sends


def launches_of(run, kernel_part: str) -> int:
    return sum(n for name, n in run.stats["kernels"].items() if kernel_part in name)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_adam(world: int):
    module = optimized("adam")
    run = emulate(module, world)
    assert_matches(run, exact=True)
    assert_traffic(run, module, world)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    # 2 (N-1)/N S per rank per call, S = 4 KiB
    assert (
        peer_bytes(run.stats, world)[0].sum() == CALLS * 2 * (world - 1) * 4096 // world
    )


@pytest.mark.parametrize("world", [2, 4, 8])
def test_megatron(world: int):
    """The fusion inside Megatron's overlap chunks: one fused kernel per chunk,
    dropout at the un-chunked global index; the matmul (emulated cuBLAS) sums
    in its own order, hence the tolerance."""
    module = optimized("megatron")
    run = emulate(module, world)
    assert_matches(run, exact=False)
    assert_traffic(run, module, world)
    assert launches_of(run, "fused") == CALLS * world * 4
    assert sum(map(sum, run.stats["nccl_calls"])) == 0


@pytest.mark.parametrize("world", [2, 4])
def test_pipeline_send_variant(world: int):
    """Stage 1's reduce_scatter + bias + dropout + residual + send: the kernel
    does phases 1 and 2, `ncclSend` ships the slice (S/N bytes per rank)."""
    module = optimized("pipeline")
    run = emulate(module, world)
    assert_matches(run, exact=False)
    assert_traffic(run, module, world, stages=2)


SEND = """
func.func @first(%x: {local}, %bias: {bias}) -> {sliced} {{
  %out = coco.fusion (%x, %bias) : ({local}, {bias}) -> {sliced} {{
  ^bb0(%x1: {local}, %bias1: {bias}):
    %sum = coco.reduce_scatter %x1 reduction = sum dim = 1 : {local} -> {sliced}
    %b = coco.add %sum, %bias1 : ({sliced}, {bias}) -> {sliced}
    %d = coco.dropout %b p = 2.500000e-01 seed = 11 : ({sliced}) -> {sliced}
    %s = coco.sqrt %d : ({sliced}) -> {sliced}
    coco.send %s to @second channel = 0 : {sliced}
    coco.yield %b : {sliced}
  }}
  func.return %out : {sliced}
}}
func.func @second() -> {sliced} {{
  %h = coco.recv from @first channel = 0 : {sliced}
  func.return %h : {sliced}
}}
"""


def send_program(element: str = "f32") -> ModuleOp:
    return cc.parse(
        SEND.format(
            local=T(f"4x8x16x{element}", "local"),
            sliced=T(f"4x8x16x{element}", "sliced<1>"),
            bias=T(f"16x{element}"),
        )
    )


@pytest.mark.parametrize("world,chunk", [(2, None), (4, 5), (8, 3)])
def test_send_variant_is_exact(world: int, chunk: int | None):
    """A slice along an inner dim (not contiguous), a sliced output and a sent
    value, chunks that do not divide the slice: bit-identical to the
    interpreter; (N-1)/N S inside the stage and S/N across."""
    module = send_program()
    run = emulate(module, world, fused_chunk=chunk)
    assert_matches(run, exact=True)
    assert_traffic(run, module, world, stages=2)


LAYER = """
  %o{i} = coco.fusion (%x{i}, %bias) {{name = "layer{i}"}} : ({L}, {B}) -> {O} {{
  ^bb0(%x: {L}, %b: {B}):
    %s = coco.reduce_scatter %x reduction = sum dim = 1 {{name = "rs{i}"}} : {L} -> {S}
    %t = coco.add %s, %b : ({S}, {B}) -> {S}
    %d = coco.dropout %t p = 2.500000e-01 seed = {seed} : ({S}) -> {S}
    %g = coco.all_gather %d : {S} -> {O}
    coco.yield %g : {O}
  }}"""


def layers_program(rows: tuple[int, ...], seeds: tuple[int, ...]) -> ModuleOp:
    """One fused all-reduce + bias + dropout per layer, layer `i` on a
    `rows[i]`x8x16 tensor with seed `seeds[i]`, each labelled."""
    types = [
        {
            "L": T(f"{n}x8x16xf32", "local"),
            "S": T(f"{n}x8x16xf32", "sliced<1>"),
            "O": T(f"{n}x8x16xf32", "replicated"),
            "B": T("16xf32"),
        }
        for n in rows
    ]
    arguments = ", ".join(f"%x{i}: {t['L']}" for i, t in enumerate(types))
    body = "".join(
        LAYER.format(i=i, seed=seed, **t)
        for i, (seed, t) in enumerate(zip(seeds, types))
    )
    outs = ", ".join(t["O"] for t in types)
    results = ", ".join(f"%o{i}" for i in range(len(rows)))
    return cc.parse(
        f"func.func @layers({arguments}, %bias: {T('16xf32')}) -> ({outs}) {{"
        f"{body}\n  func.return {results} : {outs}\n}}"
    )


@pytest.mark.parametrize("world", [2, 4, 8])
def test_fusions_of_one_form_share_a_kernel(world: int):
    """Layers that compute the same on the same types launch one kernel, each
    launch with its own signal slots and seed (docs/gpu/fused.md, "Symmetric
    buffers and signal slots"): bit-identical to the interpreter over three
    back-to-back calls, so every layer drew its own dropout mask."""
    module = layers_program((2, 2, 4, 2), (11, 12, 13, 14))
    run = emulate(module, world)
    assert_matches(run, exact=True)
    assert_traffic(run, module, world)
    kernels = [
        op.sym_name.data for op in run.lowered.walk() if isinstance(op, gpu.FuncOp)
    ]
    assert kernels == ["layers_fused_0", "layers_layer2_0"]
    assert launches_of(run, "layers_fused_0") == CALLS * world * 3


def test_lamb_bert_shares_a_kernel_per_shape():
    """LAMB over a small BERT after coco-optimize: 23 fusions, one cooperative
    kernel per distinct shape, computing what the interpreter does on 2 and
    8 ranks."""
    lamb_bert = load_example("lamb_bert")
    shapes = lamb_bert.Shapes(layers=1, hidden=16, ffn=32, vocab=40, positions=16)
    module = cc.Pipeline("coco-optimize")(lamb_bert.build(shapes))
    distinct = {tuple(shape) for _, shape in lamb_bert.parameters(shapes)}
    for world in (2, 8):
        run = emulate(module, world, seeds=(0, 1))
        assert_matches(run, exact=False)
        kernels = {
            op.sym_name.data for op in run.lowered.walk() if isinstance(op, gpu.FuncOp)
        }
        assert len(kernels) <= len(distinct) < 23
        # Each cooperative launch's occupancy query names its (renamed) kernel.
        resident = [
            op.kernel.nested_references.data[-1].data
            for op in run.lowered.walk()
            if isinstance(op, GridBlocksOp) and op.kernel is not None
        ]
        assert len(resident) == 23 and set(resident) <= kernels


@pytest.mark.parametrize("world", [2, 4])
def test_halves_reduce_in_f32(world: int):
    run = emulate(send_program("f16"), world, fused_chunk=7)
    assert_matches(run, exact=True)


@pytest.mark.parametrize("chunk", [1, 100, 128])
def test_adam_in_chunks(chunk: int):
    module = optimized("adam")
    run = emulate(module, 4, fused_chunk=chunk)
    assert_matches(run, exact=True)
    assert_traffic(run, module, 4)


@pytest.mark.parametrize(
    "program,world,chunk",
    [("adam", 4, 100), ("send", 4, 5), ("megatron", 2, None)],
)
def test_thread_sanitizer(program: str, world: int, chunk: int | None):
    """Three launches back to back under ThreadSanitizer: no report (the
    closing sync keeps a launch off buffers a peer still reads)."""
    module = send_program() if program == "send" else optimized(program)
    run = emulate(module, world, fused_chunk=chunk, sanitize="thread")
    assert_matches(run, exact=program != "megatron")


@pytest.mark.parametrize("program", ["adam", "send"])
def test_address_sanitizer(program: str):
    module = send_program() if program == "send" else optimized(program)
    run = emulate(module, 4, fused_chunk=7, sanitize="address")
    assert_matches(run, exact=True)


def without_closing_sync(lowered: ModuleOp) -> str:
    """The CUDA C of `lowered` with phase 3's waits removed from every fused
    kernel: in the send variant nothing then keeps a peer's next launch from
    overwriting the scratch this rank still reduces."""
    for kernel in lowered.walk():
        if isinstance(kernel, gpu.FuncOp) and "fused" in kernel.sym_name.data:
            phase3 = [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)][
                -1
            ]
            for wait in [op for op in phase3.walk() if isinstance(op, WaitSignalOp)]:
                wait.detach()
                wait.erase()
    return cuda_source(lowered)


def test_thread_sanitizer_sees_a_missing_closing_sync(monkeypatch: pytest.MonkeyPatch):
    """The sanitizer runs above can fail: without the closing sync, three
    back-to-back launches of the send variant race on the scratch."""
    monkeypatch.setattr(fused_emulation, "cuda_source", without_closing_sync)
    with pytest.raises(EmulationError, match="ThreadSanitizer: data race"):
        emulate(send_program(), 4, fused_chunk=5, sanitize="thread")
