"""Per-stage run state shared by the op implementations and the scheduler.

Each pipeline stage (one `func.func`) runs in its own xDSL `Interpreter`; the
state an op implementation needs beyond its operands (the world size, the
pipeline channels, the parameters updated so far) hangs off that interpreter as
a `StageContext`, reachable with `stage_context(interpreter)`.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.ir import SSAValue

from coconet_ir.analysis.channels import Channel, PipelineChannels
from coconet_ir.interpreter.values import DistValue


@dataclass
class Mailbox:
    """The in-flight messages of a pipeline: one FIFO per (from, to, channel).

    Rank `r` of a stage sends to rank `r` of the other, so one message carries
    every rank's array at once (a `DistValue`)."""

    queues: defaultdict[Channel, deque[DistValue]] = field(
        default_factory=lambda: defaultdict(deque)
    )

    def put(self, end: Channel, value: DistValue) -> None:
        self.queues[end].append(value)

    def ready(self, end: Channel) -> bool:
        return bool(self.queues[end])

    def take(self, end: Channel) -> DistValue:
        return self.queues[end].popleft()


@dataclass(frozen=True)
class ChunkFrame:
    """The chunk of a `coco.overlap` body being run: chunk `index` of `chunks`,
    and the dim of each body value that is cut
    (`coconet_ir.analysis.chunks.chunk_dims`)."""

    chunks: int
    index: int
    dims: dict[SSAValue, int]


@dataclass
class StageContext:
    """What one running stage knows besides its SSA values."""

    func_name: str
    world: int
    mailbox: Mailbox
    channels: PipelineChannels
    """The module's pipeline channels (computed once per run)."""
    updates: dict[int, DistValue] = field(default_factory=dict[int, DistValue])
    """Updated parameters by argument position (`coco.update`)."""
    chunk_frames: list[ChunkFrame] = field(default_factory=list[ChunkFrame])
    """The overlap chunks being run, innermost last (dropout keeps the index an
    element has in the un-chunked tensor)."""


_CONTEXT_KEY = "stage"


def set_stage_context(interpreter: Interpreter, context: StageContext) -> None:
    interpreter.set_data(InterpreterFunctions, _CONTEXT_KEY, context)


def stage_context(interpreter: Interpreter) -> StageContext:
    """The state of the stage `interpreter` runs (set by the scheduler)."""
    return interpreter.get_data(InterpreterFunctions, _CONTEXT_KEY, _no_context)


def _no_context() -> StageContext:
    raise RuntimeError("coco ops must run inside coconet_ir.interpreter.interpret")
