"""The fused collective kernel (lowering/fused_collectives.py): one kernel and
one launch per fusion, no NCCL call, the module's symmetric layout and signal
slots as the plan says, upstream ops plus the peer/signal ops only."""

from __future__ import annotations

from io import StringIO

import pytest
from helpers import T, example
from xdsl.dialects import gpu

import coconet_ir as cc
from coconet_ir.analysis.fused_plan import FusedPlan
from coconet_ir.backend.cuda.printer import print_cuda
from coconet_ir.dialects import coco_gpu
from coconet_ir.dialects.coco import FusionOp
from coconet_ir.lowering.fused_collectives import (
    SIGNAL_SLOTS_ATTR,
    SYMMETRIC_BYTES_ATTR,
)

PEER_OPS = {
    "coco_gpu.peer_view",
    "coco_gpu.signal",
    "coco_gpu.wait_signal",
    "coco_gpu.count_peer_bytes",
}


def optimized(name: str):
    return cc.Pipeline("coco-optimize")(example(name))


def lowered(module, world: int):
    return cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(module)


def kernels(module) -> list[gpu.FuncOp]:
    return [op for op in module.walk() if isinstance(op, gpu.FuncOp)]


def fused_kernel(module) -> gpu.FuncOp:
    (kernel,) = [k for k in kernels(module) if "fused" in k.sym_name.data]
    return kernel


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_adam_is_one_fused_kernel(world: int):
    source = optimized("adam")
    (fusion,) = [op for op in source.walk() if isinstance(op, FusionOp)]
    plan = FusedPlan.of(fusion, world)
    assert isinstance(plan, FusedPlan)
    module = lowered(source, world)
    cc.verify(module)
    kernel = fused_kernel(module)
    launches = [
        op
        for op in module.walk()
        if isinstance(op, gpu.LaunchFuncOp)
        and op.kernel.nested_references.data[-1].data == kernel.sym_name.data
    ]
    assert len(launches) == 1
    names = [op.name for op in module.walk()]
    assert not [n for n in names if n.startswith("coco_gpu.nccl")]
    assert names.count("coco_gpu.next_epoch") == 1
    assert names.count("coco_gpu.symmetric_buffer") == 2  # scratch, gather buffer
    inside = [op.name for op in kernel.walk()]
    assert inside.count("coco_gpu.signal") == 2  # phase 1, phase 2
    assert inside.count("coco_gpu.wait_signal") == 2  # phase 2, phase 3
    assert inside.count("coco_gpu.count_peer_bytes") == 2
    assert inside.count("gpu.barrier") == 4
    attributes = module.attributes
    assert attributes[SIGNAL_SLOTS_ATTR].value.data == plan.signal_slots  # type: ignore[union-attr]
    assert attributes[SYMMETRIC_BYTES_ATTR].value.data == 2 * 1024 * 4  # type: ignore[union-attr]


def test_the_kernel_is_upstream_but_for_peers_and_signals():
    module = lowered(optimized("adam"), 4)
    for op in fused_kernel(module).walk():
        if op.dialect_name() == "coco_gpu":
            assert op.name in PEER_OPS, op.name
        else:
            upstream = ("gpu", "arith", "scf", "memref", "math", "vector")
            assert op.dialect_name() in upstream, op.name


def test_the_fused_kernel_prints_as_cuda():
    module = lowered(optimized("adam"), 4)
    out = StringIO()
    print_cuda(module, out)
    text = out.getvalue()
    assert "coco::signal(coco::signal_slot(peers," in text
    assert "coco::wait_signal(coco::own_slot(peers," in text
    assert "coco::count_peer_bytes(peers," in text
    assert 'extern "C" size_t coco_symmetric_bytes(void) { return 8192; }' in text
    assert 'extern "C" size_t coco_signal_slots(void) { return 8; }' in text
    assert "ncclAllReduce" not in text and "ncclReduceScatter" not in text


FUSION = """
  %{x} = coco.fusion (%{a}) : ({local}) -> {replicated} {{
  ^bb0(%{a}1: {local}):
    %s = coco.reduce_scatter %{a}1 reduction = {kind} dim = 0 : {local} -> {sliced}
    %r = coco.relu %s : ({sliced}) -> {sliced}
    %g = coco.all_gather %r : {sliced} -> {replicated}
    coco.yield %g : {replicated}
  }}
"""


def fusion(x: str, a: str, size: int, kind: str) -> str:
    return FUSION.format(
        x=x,
        a=a,
        kind=kind,
        local=T(f"{size}xf32", "local"),
        sliced=T(f"{size}xf32", "sliced<0>"),
        replicated=T(f"{size}xf32"),
    )


def test_two_fusions_get_disjoint_buffers_and_slots():
    a, b = T("64xf32", "local"), T("32xf32", "local")
    ra, rb = T("64xf32"), T("32xf32")
    text = (
        f"func.func @f(%a: {a}, %b: {b}) -> ({ra}, {rb}) {{"
        + fusion("x", "a", 64, "max")
        + fusion("y", "b", 32, "sum")
        + f"  func.return %x, %y : {ra}, {rb}\n}}"
    )
    module = lowered(cc.parse(text), 2)
    cc.verify(module)
    offsets = [
        op.offset.value.data
        for op in module.walk()
        if isinstance(op, coco_gpu.SymmetricBufferOp)
    ]
    assert offsets == [0, 256, 512, 768]
    assert module.attributes[SIGNAL_SLOTS_ATTR].value.data == 2 * 4  # type: ignore[union-attr]
    assert len([k for k in kernels(module) if "fused" in k.sym_name.data]) == 2
