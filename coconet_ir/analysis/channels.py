"""Pipeline channels: which `coco.send` feeds which `coco.recv`, and the stages
they connect (docs/dialect.md, "Pipelines: send and recv").

A channel is (source stage, destination stage, channel number): rank `r` of the
source stage sends to rank `r` of the destination. In a valid module every
channel in use has exactly one send and one recv, of the same type.
`PipelineChannels.of(module)` finds every end in one walk; the verifier
(`coconet_ir.ir.verify`) checks the matching with it, the interpreter routes
messages and picks the stages to run with it, coco-fuse-send finds the recv of
a send with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute

from coconet_ir.dialects.coco import RecvOp, SendOp

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True)
class Channel:
    """One pipeline channel: (from stage, to stage, channel number)."""

    source: str
    dest: str
    channel: int


def channel_of(op: SendOp | RecvOp, stage: str) -> Channel:
    """The channel a send or recv of the function named `stage` uses."""
    peer = op.stage.root_reference.data
    number = op.channel.value.data
    if isinstance(op, SendOp):
        return Channel(stage, peer, number)
    return Channel(peer, stage, number)


@dataclass
class PipelineChannels:
    """Every send and recv of a module, by channel, and the stage graph."""

    sends: dict[Channel, list[SendOp]] = field(
        default_factory=dict[Channel, list[SendOp]]
    )
    recvs: dict[Channel, list[RecvOp]] = field(
        default_factory=dict[Channel, list[RecvOp]]
    )
    ends: dict[SendOp | RecvOp, Channel] = field(
        default_factory=dict[SendOp | RecvOp, Channel]
    )
    """The channel of each send and recv."""
    functions: list[str] = field(default_factory=list[str])
    """The module's functions, by name, in order."""

    @staticmethod
    def of(module: ModuleOp) -> PipelineChannels:
        """Find every send and recv of the module's functions, in one walk."""
        found = PipelineChannels()
        for func in module.ops:
            if not isinstance(func, FuncOp):
                continue
            name = func.sym_name.data
            found.functions.append(name)
            for op in func.walk():
                if isinstance(op, SendOp | RecvOp):
                    found.add(op, channel_of(op, name))
        return found

    def add(self, op: SendOp | RecvOp, channel: Channel) -> None:
        self.ends[op] = channel
        if isinstance(op, SendOp):
            self.sends.setdefault(channel, []).append(op)
        else:
            self.recvs.setdefault(channel, []).append(op)

    def stages(self) -> nx.Graph:
        """The functions (by name) as nodes, an edge for every channel between
        two: a pipeline's stages are a connected group."""
        from networkx import Graph  # imported here: start-up stays cheap

        graph = Graph()
        graph.add_nodes_from(self.functions)
        graph.add_edges_from((c.source, c.dest) for c in self.ends.values())
        return graph

    def stage_indices(self) -> dict[str, int]:
        """Each function's stage number within its pipeline: its position, in
        module order, among the functions connected to it (0 for a function
        that is a pipeline of its own). Rank `r` of stage `s` is global rank
        `s * N + r` of a pipeline's communicator (docs/gpu/cuda.md)."""
        edges = [(c.source, c.dest) for c in self.ends.values()]
        return stage_indices(self.functions, edges)

    def channel(self, op: SendOp | RecvOp) -> Channel:
        return self.ends[op]

    def recv_of(self, send: SendOp) -> RecvOp:
        """The recv that takes what `send` sends (verified IR has one)."""
        (recv,) = self.recvs[self.ends[send]]
        return recv

    def problems(self) -> Iterator[tuple[SendOp | RecvOp, str]]:
        """Each send or recv whose channel does not match, with the rule it
        breaks, in module order."""
        for op, channel in self.ends.items():
            problem = self.problem(op, channel)
            if problem is not None:
                yield op, problem

    def problem(self, op: SendOp | RecvOp, channel: Channel) -> str | None:
        """Why `op`'s channel does not match: its stage at the other end must
        hold exactly one peer (a recv for a send, a send for a recv) of the
        same type."""
        if isinstance(op, SendOp):
            peers: Sequence[SendOp | RecvOp] = self.recvs.get(channel, [])
            peer, other, at = "coco.recv", f"from @{channel.source}", channel.dest
            does, peer_does = "sends", "receives"
        else:
            peers = self.sends.get(channel, [])
            peer, other, at = "coco.send", f"to @{channel.dest}", channel.source
            does, peer_does = "receives", "sends"
        if len(peers) != 1:
            return (
                f"needs exactly one {peer} {other} on channel {channel.channel} in "
                f"stage @{at}, found {len(peers)}"
            )
        mine, theirs = message_type(op), message_type(peers[0])
        if mine != theirs:
            return (
                f"{does} {mine} but the matching {peer} in @{at} {peer_does} {theirs}"
            )
        return None


def stage_indices(
    functions: Sequence[str], edges: Iterable[tuple[str, str]]
) -> dict[str, int]:
    """The index of each function in its pipeline: its position, in module
    order, among the functions its channels connect it to (transitively); 0
    for a function that is no pipeline's stage. Rank `r` of stage `s` is rank
    `s * N + r` of the communicator spanning every stage. The device level
    finds the edges from its `coco_gpu.nccl_send`/`nccl_recv` ops."""
    group = {name: name for name in functions}

    def root(name: str) -> str:
        while group[name] != name:
            group[name] = group[group[name]]
            name = group[name]
        return name

    for source, dest in edges:
        if source in group and dest in group:
            group[root(source)] = root(dest)
    seen: dict[str, int] = {}
    indices: dict[str, int] = {}
    for name in functions:
        top = root(name)
        indices[name] = seen.get(top, 0)
        seen[top] = indices[name] + 1
    return indices


def message_type(op: SendOp | RecvOp) -> Attribute:
    """The type of what `op` sends or receives."""
    return op.operand.type if isinstance(op, SendOp) else op.result.type
