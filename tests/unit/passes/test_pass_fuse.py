"""coco-fuse on the examples: after split (and reorder, when it exists) every
example stays equivalent on 2, 4 and 8 ranks, and the groups are the expected
ones."""

from __future__ import annotations

import re

import pytest
from helpers import EXAMPLES_DIR, assert_equivalent, example, the_function
from xdsl.dialects.builtin import ModuleOp, StringAttr

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.passes.base import function_body_ops
from coconet_ir.passes.fuse import Fuse, chain_groups, collective_groups, is_fusible
from coconet_ir.passes.optimize import Optimize

NAMES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.mlir"))
SPLIT_DIM = {"megatron": "{dim=1}", "pipeline": "{dim=1}"}
"""[4, 8, 64] activations: dim 0 (4) is not divisible by 8 ranks."""


def split(name: str) -> str:
    return f"coco-split-all-reduce{SPLIT_DIM.get(name, '')}"


def fusions(module: ModuleOp) -> list[coco.FusionOp]:
    return [op for op in module.walk() if isinstance(op, coco.FusionOp)]


@pytest.mark.parametrize("name", NAMES)
def test_split_then_fuse_is_equivalent(name: str) -> None:
    assert_equivalent(name, f"{split(name)},coco-fuse")


@pytest.mark.parametrize("name", NAMES)
def test_split_reorder_fuse_is_equivalent(name: str) -> None:
    assert_equivalent(name, f"{split(name)},coco-reorder,coco-fuse")


def test_adam_is_one_fused_all_reduce() -> None:
    module = assert_equivalent("adam", "coco-split-all-reduce,coco-reorder,coco-fuse")
    (fusion,) = fusions(module)
    kinds = [op.name for op in fusion.block.ops]
    assert kinds[0] == "coco.reduce_scatter"
    assert kinds.count("coco.all_gather") >= 1
    assert kinds[-2] == "coco.all_gather" and kinds[-1] == "coco.yield"
    assert fusion.label is not None
    assert fusion.label.data == "grad_sum_rs_fused"


def test_split_megatron_has_fused_all_reduce_and_a_chain() -> None:
    module = assert_equivalent("megatron", "coco-split-all-reduce{dim=1},coco-fuse")
    collective, chain = fusions(module)
    assert [op.name for op in collective.block.ops] == [
        "coco.reduce_scatter",
        "coco.all_gather",
        "coco.yield",
    ]
    assert [op.name for op in chain.block.ops] == [
        "coco.add",
        "coco.dropout",
        "coco.add",
        "coco.yield",
    ]


def test_fusion_outputs_are_only_values_used_outside() -> None:
    module = cc.Pipeline("coco-split-all-reduce,coco-fuse")(example("sgd"))
    for fusion in fusions(module):
        assert len(fusion.outputs) == 1
        assert all(result.uses for result in fusion.outputs)


def test_refusal_leaves_the_module_unchanged() -> None:
    module = cc.Pipeline("coco-split-all-reduce{dim=1}")(example("megatron"))
    before = cc.to_text(module)
    with pytest.raises(cc.CocoError, match="no op named"):
        cc.Pipeline("coco-fuse{op=nope}").apply(module)
    assert cc.to_text(module) == before


def test_fuse_twice_changes_nothing() -> None:
    once = cc.Pipeline("coco-split-all-reduce,coco-fuse")(example("adam"))
    twice = cc.Pipeline("coco-fuse")(once)
    assert cc.to_text(twice) == cc.to_text(once)


LAMB_SCHEDULE = (
    "coco-split-all-reduce,coco-reorder,coco-slice-state,coco-slice-norm,coco-fuse"
)


def outside_fusions(module: ModuleOp) -> list:
    (func,) = [op for op in module.ops if op.name == "func.func"]
    return [op for op in func.body.block.ops if not isinstance(op, coco.FusionOp)]


def test_lamb_is_one_fusion_through_its_norms() -> None:
    """reduce_scatter -> moments -> slice-local sums of squares -> scalar
    all_reduces -> trust ratio and update -> all_gather, in ONE region; only
    rank-0 scalar arithmetic (constants, 1 - b1, ...) and the updates stay
    outside (issue 9, docs/passes/coco-fuse.md)."""
    module = assert_equivalent("lamb", LAMB_SCHEDULE)
    (fusion,) = fusions(module)
    kinds = [op.name for op in fusion.block.ops]
    assert kinds.count("coco.reduce_scatter") == 1
    assert kinds.count("coco.reduce") == 2  # |w|^2 and |r|^2 of the slices
    assert kinds.count("coco.all_reduce") == 2  # their scalar partials
    assert kinds.count("coco.all_gather") == 1  # the new weights
    for op in outside_fusions(module):
        if isinstance(op, coco.UpdateOp) or op.name == "func.return":
            continue
        assert op.results[0].type.rank == 0, op.name  # host scalar arithmetic
        assert not isinstance(op, coco.AllReduceOp | coco.ReduceOp)


def test_fusion_grows_backward_over_producers_it_alone_reads() -> None:
    """CoCoNet's Adam computes `beta1 * m` before the gradient's all_reduce;
    with the moments sliced, those products join the fused kernel instead of
    being kernels of their own."""
    module = assert_equivalent(
        "adam", "coco-split-all-reduce,coco-reorder,coco-slice-state,coco-fuse"
    )
    (fusion,) = fusions(module)
    for op in outside_fusions(module):
        if op.results:
            assert op.results[0].type.rank == 0, op.name
    assert any(
        isinstance(op, coco.MulOp) and op.operands[1] in fusion.block.args
        for op in fusion.block.ops
    )


def test_without_reductions_lamb_has_two_fusions() -> None:
    """coco-optimize's setting until the lowering makes the whole of LAMB one
    kernel: the norms' all_reduces cut the region in two."""
    module = assert_equivalent(
        "lamb", LAMB_SCHEDULE.replace("fuse", "fuse{reductions=false}")
    )
    assert len(fusions(module)) == 2
    assert sum(isinstance(op, coco.AllReduceOp) for op in outside_fusions(module)) == 2


def test_grouping_keeps_only_open_groups_on_a_deep_stack() -> None:
    """coco-fuse's cycle check keeps, per op, the groups it reaches; on 100
    Megatron layers in a row (the residual stream reaches every earlier
    layer) only groups some later op can still join are kept, so the sets
    stay a few groups and the pass is linear in the depth."""
    layers = []
    t = "!coco.tensor<4x8xf32, replicated>"
    x = "%x0"
    for k in range(100):
        layers += [
            f"%s{k} = coco.all_reduce %p{k} reduction = sum : "
            f"!coco.tensor<4x8xf32, local> -> {t}",
            f"%d{k} = coco.dropout %s{k} p = 0.1 seed = {k} : ({t}) -> {t}",
            f"%x{k + 1} = coco.add %d{k}, {x} : ({t}, {t}) -> {t}",
        ]
        x = f"%x{k + 1}"
    args = ", ".join(
        [f"%x0: {t}"] + [f"%p{k}: !coco.tensor<4x8xf32, local>" for k in range(100)]
    )
    module = cc.Pipeline("coco-split-all-reduce")(
        cc.parse(
            f"func.func @stack({args}) -> {t} {{\n  "
            + "\n  ".join(layers)
            + f"\n  func.return {x} : {t}\n}}"
        )
    )
    block = the_function(module).body.block
    for grouping in (collective_groups(block), chain_groups(block)):
        assert len(grouping.group_of) >= 100
        assert max(len(s) for s in grouping.reach.values()) <= 4


def before_fuse(name: str) -> ModuleOp:
    """The example as coco-optimize hands it to coco-fuse: its parts before."""
    module = example(name)
    for step in Optimize().steps():
        if isinstance(step.part, Fuse):
            return module
        step(module)
    raise AssertionError("coco-optimize has no coco-fuse")


def labelled(module: ModuleOp) -> ModuleOp:
    """A copy whose ops `op=` may name (the reduce_scatters and elementwise
    ops of function bodies) are labelled `t0`, `t1`, ..."""
    copy = module.clone()
    fusible = [op for op in function_body_ops(copy) if is_fusible(op)]
    for i, op in enumerate(fusible):
        op.attributes["name"] = StringAttr(f"t{i}")
    return copy


def region_labels(fusion: coco.FusionOp) -> list[str]:
    """The labels `labelled` gave the region's ops."""
    labels = [coco.label_of(op) for op in fusion.block.ops]
    return [n for n in labels if n is not None and re.fullmatch(r"t\d+", n)]


@pytest.mark.parametrize("stage", ["example", "before-fuse"])
@pytest.mark.parametrize("name", NAMES)
def test_targeted_fuse_yields_the_default_region(name: str, stage: str) -> None:
    """`coco-fuse{op=X}` from any op X of a region the default coco-fuse
    makes yields that region and no other (issue 25: on LAMB as its example
    writes it, it refused with a cycle that the default fuse went around).
    One targeted result per region runs against the interpreter."""
    module = labelled(example(name) if stage == "example" else before_fuse(name))
    default = cc.Pipeline("coco-fuse")(module)
    for region in fusions(default):
        expected = cc.to_text(region)
        for i, label in enumerate(region_labels(region)):
            targeted = cc.Pipeline(f"coco-fuse{{op={label}}}")(module)
            (fusion,) = fusions(targeted)
            assert cc.to_text(fusion) == expected, (name, label)
            if i == 0 and stage == "example":
                for world in (2, 4, 8):
                    assert cc.equivalent(module, targeted, world, seed=world)
