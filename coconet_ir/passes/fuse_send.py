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

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllReduceOp,
    RecvOp,
    SendOp,
    TensorType,
    label_of,
    tensor_type,
)
from coconet_ir.passes.base import CocoPass, rewrite_once, rewriting


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
    label = label_of(recv)
    gather = AllGatherOp(sliced_recv, label=None if label is None else f"{label}_ag")
    with rewriting(recv):
        rewriter.replace(recv, [sliced_recv, gather])


def send_slice(send: SendOp, gather: AllGatherOp, rewriter: PatternRewriter) -> None:
    """Send the gather's operand (this rank's slice) instead of its result."""
    slice_value: SSAValue = gather.operand
    rewriter.replace_uses_with_if(
        gather.result, slice_value, lambda use: use.operation is send
    )
    if not gather.result.uses:
        rewriter.erase(gather)


@dataclass(frozen=True)
class FuseSendPattern(RewritePattern):
    """Send the slice a send's all_gather gathers; its recv gathers instead.
    `channels` are the module's pipeline channels (the recv of each send)."""

    channels: PipelineChannels
    label: str | None = None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SendOp, rewriter: PatternRewriter) -> None:
        if self.label is not None and label_of(op) != self.label:
            return
        gather = sent_gather(op)
        if isinstance(gather, str):
            return
        recv = self.channels.recv_of(op)
        gather_after_recv(recv, tensor_type(gather.operand), rewriter)
        send_slice(op, gather, rewriter)


@dataclass(frozen=True)
class FuseSend(CocoPass):
    """Send slices instead of all-gathered tensors between pipeline stages; the
    receiving stage gathers."""

    name = "coco-fuse-send"

    def candidates(self, module: ModuleOp) -> Iterable[Operation]:
        return (op for op in module.walk() if isinstance(op, SendOp))

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, SendOp)
        gather = sent_gather(op)
        return gather if isinstance(gather, str) else None

    def rewrite(self, module: ModuleOp) -> None:
        channels = PipelineChannels.of(module)
        rewrite_once(module, FuseSendPattern(channels, self.op))
