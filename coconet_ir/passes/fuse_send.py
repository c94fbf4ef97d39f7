"""coco-fuse-send: pipeline send fusion, a stage sends slices instead of the
gathered tensor and the receiving stage gathers them.

CoCoNet's send fusion (ASPLOS'22, section 6): when a stage sends a replicated
tensor that an `all_gather` has just built, every rank of the receiving stage
would get the same full tensor from its peer. Sending each rank's slice and
gathering in the receiving stage moves `N` times fewer bytes over the
inter-stage link (the gather runs on the receiving stage's fast intra-group
links, where `coco-overlap` can overlap it with the first matmul):

    %ag = coco.all_gather %s            // stage @A, %s : sliced<D>
    coco.send %ag to @B channel = C
    %h = coco.recv from @A channel = C  // stage @B, replicated

becomes

    coco.send %s to @B channel = C      // the all_gather is erased if unused
    %h0 = coco.recv from @A channel = C // sliced<D>
    %h = coco.all_gather %h0            // replicated, as before

Both functions change in one rewrite: the send and its recv always agree.

Preconditions: the sent value is the result of a `coco.all_gather`. A value
straight from a `coco.all_reduce` needs `coco-split-all-reduce` first; a value
computed from a gathered tensor needs `coco-reorder` first. `op=NAME` names the
send. A named recv `NAME` is followed by an all_gather named `NAME_ag`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllReduceOp,
    RecvOp,
    SendOp,
    TensorType,
    channel_of,
    find_stage,
    tensor_type,
)
from coconet_ir.passes.base import CocoPass, rewrite_once, stage_name


def sent_gather(send: SendOp) -> AllGatherOp | str:
    """The all_gather whose result `send` sends, or why there is none."""
    producer = send.operand.owner
    if isinstance(producer, AllGatherOp):
        return producer
    if isinstance(producer, AllReduceOp):
        return (
            "the sent value comes from a coco.all_reduce: split the all_reduce "
            "first (coco-split-all-reduce)"
        )
    if isinstance(producer, Operation):
        return (
            "the sent value must come from a coco.all_gather, it comes from "
            f"'{producer.name}' (move the gather after the compute first: "
            "coco-reorder)"
        )
    return "the sent value must come from a coco.all_gather, it is a block argument"


def matching_recv(send: SendOp) -> RecvOp:
    """The recv of the destination stage on the send's channel (the verifier
    guarantees there is exactly one)."""
    channel = channel_of(send)
    dest = find_stage(send, send.stage)
    return next(
        op for op in dest.walk() if isinstance(op, RecvOp) and channel_of(op) == channel
    )


def gather_after_recv(
    recv: RecvOp, sliced: TensorType, rewriter: PatternRewriter
) -> None:
    """Make `recv` receive `sliced` and gather it; the gather's result takes
    the place of the recv's old (replicated) result."""
    sliced_recv = RecvOp.create(
        result_types=[sliced],
        properties=dict(recv.properties),
        attributes=dict(recv.attributes),
    )
    sliced_recv.location = recv.location
    name = stage_name(recv)
    gather = AllGatherOp(sliced_recv, name=None if name is None else f"{name}_ag")
    gather.location = recv.location
    rewriter.replace(recv, [sliced_recv, gather])


def send_slice(send: SendOp, gather: AllGatherOp, rewriter: PatternRewriter) -> None:
    """Send the gather's operand (this rank's slice) instead of its result."""
    slice_value: SSAValue = gather.operand
    rewriter.replace_uses_with_if(
        gather.result, slice_value, lambda use: use.operation is send
    )
    if not gather.result.uses:
        rewriter.erase(gather)


@dataclass
class FuseSendPattern(RewritePattern):
    fuse: FuseSend
    found: list[SendOp] = field(default_factory=list[SendOp])

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SendOp, rewriter: PatternRewriter) -> None:
        if not self.fuse.targets(op):
            return
        self.found.append(op)
        gather = sent_gather(op)
        if isinstance(gather, str):
            self.fuse.skip_or_refuse(op, gather)
            return
        gather_after_recv(matching_recv(op), tensor_type(gather.operand), rewriter)
        send_slice(op, gather, rewriter)


@dataclass(frozen=True)
class FuseSend(CocoPass):
    """Send slices instead of all-gathered tensors between pipeline stages; the
    receiving stage gathers."""

    name = "coco-fuse-send"

    def transform(self, ctx: Context, module: ModuleOp) -> bool:
        pattern = FuseSendPattern(self)
        rewrite_once(module, pattern)
        return bool(pattern.found)
