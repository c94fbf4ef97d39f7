"""coco-fuse-collective: a producer and the collective that consumes it become
one region, which the lowering computes and communicates tile by tile
(docs/passes/coco-fuse-collective.md).

Punniyamurthy, Hamidouche and Beckmann ("Optimizing Distributed ML
Communication with Fused Computation-Collective Operations", 2023) fuse a
computation with the collective that depends on it into one kernel whose
workgroups send each finished tile to its destination at once, while other
workgroups still compute. Their three operators are the patterns this pass
groups:

    %e = coco.embedding %tables, %indices ...     // DLRM, tables sliced<0>
    %a = coco.all_to_all %e dim = 1               //   → the batch split

    %y = coco.matmul %x, %w                       // decode GEMV, row-parallel:
    %s = coco.all_reduce %y reduction = sum       //   local partial sums

    %h = coco.batch_matmul %tokens, %experts      // MoE: each rank's experts
    %o = coco.all_to_all %h dim = 1               //   → tokens back

becomes

    %a = coco.fusion (%tables, %indices) {name = "NAME_fused"} ... {
      %e = coco.embedding ...
      %a1 = coco.all_to_all %e dim = 1 ...
      coco.yield %a1
    }

The producer (`coco.embedding`, `coco.matmul`, `coco.batch_matmul`) must have
the collective (`coco.all_to_all`, `coco.all_reduce`, `coco.reduce_scatter`)
as its only user, in the same block. A fusion's meaning is its body, so values
never change. `op=NAME` names the producer. With `where_it_pays`
(coco-optimize's rule, `FuseCollective.problem`): only the pairs the lowering has a
tile-granular kernel for (`tile_kernel_problem`) — an embedding of sliced<0>
tables into its all_to_all, a GEMM with a sliced<0> result into an
all_to_all, a row-parallel GEMV (at most `GEMV_ROWS` rows) into an
all_reduce sum; CoCoNet's split + reorder + overlap handle the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, Region
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.analysis.kernels import COLLECTIVES, PRODUCERS, tile_kernel_problem
from coconet_ir.diagnostics import RemarkKind, remark
from coconet_ir.dialects.coco import FusionOp, label_attribute, label_of
from coconet_ir.passes.base import CocoPass, function_body_ops, rewrite_once
from coconet_ir.passes.regions import Boundary, outline


def consumer(op: Operation) -> Operation | str:
    """The collective `op` (a producer) fuses with, or why there is none."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return (
            f"its result has {len(uses)} uses; only a producer whose one user is "
            "a collective fuses with it"
        )
    user = uses[0].operation
    if not isinstance(user, COLLECTIVES):
        return (
            f"its user '{user.name}' is not a coco.all_to_all, coco.all_reduce or "
            "coco.reduce_scatter"
        )
    if user.parent_block() is not op.parent_block():
        return f"its user '{user.name}' is in another block"
    return user


def build_fused_collective(found: Boundary, body) -> FusionOp:
    producer = found.ops[0]
    label = label_of(producer)
    return FusionOp.create(
        operands=list(found.inputs),
        result_types=[v.type for v in found.outputs],
        attributes=label_attribute(None if label is None else f"{label}_fused"),
        regions=[Region(body)],
    )


@dataclass(frozen=True)
class FuseCollectiveFunction(RewritePattern):
    """Outline every targeted producer + collective pair of one function."""

    pass_: FuseCollective

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: FuncOp, rewriter: PatternRewriter) -> None:
        if func.is_declaration:
            return
        pairs = []
        for op in func.body.block.ops:
            if not isinstance(op, PRODUCERS) or not self.pass_.targets(op):
                continue
            collective, why = consumer(op), self.pass_.problem(op)
            if why is not None:
                if not isinstance(collective, str):  # the rule of where_it_pays
                    why = f"no tile kernel for it and its '{collective.name}': {why}"
                remark(RemarkKind.MISSED, self.pass_.name, "FusedCollective", why, op)
                continue
            assert not isinstance(collective, str)
            pairs.append((op, collective))
        for producer, user in pairs:
            made = f"'{producer.name}' and its '{user.name}' made one region"
            name = self.pass_.name
            remark(RemarkKind.PASSED, name, "FusedCollective", made, producer)
            outline([producer, user], build_fused_collective, rewriter)


@dataclass(frozen=True)
class FuseCollective(CocoPass):
    """Fuse an embedding or matmul with the collective consuming it into a
    `coco.fusion` the lowering runs tile by tile."""

    name = "coco-fuse-collective"

    where_it_pays: bool = False
    """Only the pairs the lowering has a tile kernel for (coco-optimize's
    rule, `problem`)."""

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in function_body_ops(module) if isinstance(op, PRODUCERS))

    def problem(self, op: Operation) -> str | None:
        collective = consumer(op)
        if isinstance(collective, str):
            return collective
        if self.where_it_pays:
            return tile_kernel_problem(op, collective)
        return None

    def not_a_candidate(self, op: Operation) -> str | None:
        return "it is not a coco.embedding, coco.matmul or coco.batch_matmul"

    def rewrite(self, module: ModuleOp) -> None:
        rewrite_once(module, FuseCollectiveFunction(self))
