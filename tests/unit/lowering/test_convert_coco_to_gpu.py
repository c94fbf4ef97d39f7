"""convert-coco-to-gpu on every example, original and after coco-optimize, on
2, 4 and 8 ranks: the output verifies, holds no coco op, re-parses and
round-trips, and its kernels are made of upstream ops only."""

from __future__ import annotations

import pytest
from helpers import EXAMPLES_DIR
from xdsl.dialects import func, gpu
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.dialects.coco_gpu import ENTRY_ATTR, PeersType
from coconet_ir.lowering.coco_to_gpu import ConversionRefused, ConvertCocoToGpu

EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.mlir"))
UPSTREAM = ("arith.", "math.", "memref.", "scf.", "gpu.", "cf.assert")
"""MLIR's own dialects (`cf.assert`: the embedding's bounds check)."""
FUSED_OPS = (
    "coco_gpu.peer_view",
    "coco_gpu.signal",
    "coco_gpu.wait_signal",
    "coco_gpu.count_peer_bytes",
    "coco_gpu.tile_computed",
    "vector.",  # 16-byte accesses (docs/gpu/fused.md)
)


def fused(kernel: gpu.FuncOp) -> bool:
    return any(isinstance(t, PeersType) for t in kernel.function_type.inputs.data)


def example(name: str) -> ModuleOp:
    return cc.parse_file(str(EXAMPLES_DIR / f"{name}.mlir"))


def lower(module: ModuleOp, world: int | None, optimize: bool = False) -> ModuleOp:
    option = "" if world is None else f"{{world={world}}}"
    pipeline = f"convert-coco-to-gpu{option}"
    if optimize:
        pipeline = f"coco-optimize,{pipeline}"
    return cc.Pipeline(pipeline)(module)


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("optimize", [False, True], ids=["original", "optimized"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_lowers(name: str, optimize: bool, world: int):
    module = lower(example(name), world, optimize)  # verified by the pipeline
    assert (
        module.attributes["coco.world_size"]
        == cc.parse(
            f"module attributes {{coco.world_size = {world} : i64}} {{}}"
        ).attributes["coco.world_size"]
    )
    assert "gpu.container_module" in module.attributes
    assert not [op.name for op in module.walk() if op.name.startswith("coco.")]
    kernels = {k.sym_name.data for k in module.walk() if isinstance(k, gpu.FuncOp)}
    for op in module.walk():
        if isinstance(op, gpu.LaunchFuncOp):
            assert op.kernel.nested_references.data[-1].data in kernels
        if isinstance(op, func.FuncOp):
            assert ENTRY_ATTR in op.attributes
            assert not op.function_type.outputs.data
    if world == 4:  # the world changes sizes and constants, not the syntax
        text = cc.to_text(module)
        assert cc.to_text(cc.parse(text)) == text


@pytest.mark.parametrize("optimize", [False, True], ids=["original", "optimized"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_kernels_are_upstream_only(name: str, optimize: bool):
    module = lower(example(name), 4, optimize)
    bodies = [k for k in module.walk() if isinstance(k, gpu.FuncOp)]
    for kernel in bodies:
        assert "gpu.kernel" in kernel.attributes  # MLIR's marker
        # A fused collective kernel (it takes the peer table) also signals and
        # stores to peers: tests/unit/lowering/test_fused_collectives.py.
        allowed = UPSTREAM + (FUSED_OPS if fused(kernel) else ())
        for op in kernel.walk():
            if op is not kernel:
                assert op.name.startswith(allowed), (kernel.sym_name.data, op.name)


def test_sgd_is_all_reduce_then_two_kernels_writing_w_in_place():
    text = cc.to_text(lower(example("sgd"), 4))
    assert "coco_gpu.nccl_all_reduce %g, %sum reduction = sum" in text
    assert "@kernels::@sgd_mul_0" in text and "@kernels::@sgd_sub_0" in text
    assert "memref.copy" not in text


def test_world_from_the_module_attribute():
    module = example("sgd")
    module.attributes["coco.world_size"] = cc.parse(
        "module attributes {coco.world_size = 2 : i64} {}"
    ).attributes["coco.world_size"]
    assert cc.to_text(lower(module, None)) == cc.to_text(lower(example("sgd"), 2))


@pytest.mark.parametrize(
    ("text", "world", "message"),
    [
        (
            "func.func @f(%x: !coco.tensor<8xf32, local>) { func.return }",
            None,
            "needs the world size",
        ),
        (
            "func.func @f(%x: !coco.tensor<6xf32, sliced<0>>) { func.return }",
            4,
            "is not divisible by the world size 4",
        ),
        (
            "module attributes {coco.world_size = 4 : i64} { func.func @f() { "
            "func.return } }",
            2,
            "disagrees with the module's coco.world_size = 4",
        ),
    ],
)
def test_refusal_leaves_the_module_unchanged(text: str, world: int | None, message):
    module = cc.parse(text)
    before = cc.to_text(module)
    with pytest.raises(ConversionRefused, match=message):
        ConvertCocoToGpu(world=world).apply(cc.make_context(), module)
    assert cc.to_text(module) == before


def test_a_failure_while_converting_leaves_the_module_unchanged(monkeypatch):
    """The conversion works on a copy: even an error it did not foresee
    leaves the module as it was."""
    from coconet_ir.lowering import coco_to_gpu

    def broken(*args, **kwargs):
        raise RuntimeError("broken")

    monkeypatch.setattr(coco_to_gpu, "reduce_kernel", broken)
    module = example("lamb")
    before = cc.to_text(module)
    with pytest.raises(Exception, match="broken"):
        ConvertCocoToGpu(world=2).apply(cc.make_context(), module)
    assert cc.to_text(module) == before
