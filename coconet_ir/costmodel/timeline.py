"""What a prediction is: a total time and the timeline behind it, interval
by interval on named streams (docs/performance.md, "Reading a prediction")."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

COMPUTE = "compute"
COMMUNICATION = "communication"


@dataclass(frozen=True)
class Interval:
    """One kernel, library call, copy or pipeline stage on one stream."""

    stream: str
    label: str
    kind: str
    """`compute` or `communication`."""
    start: float
    end: float
    overlapped: bool = False
    """A fused kernel that computes and communicates at once (its stream is
    its kind's; a picture draws it as both)."""

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Prediction:
    """The predicted time of one call of a function on every rank (ranks run
    the same program, so one rank's timeline stands for all), with what it is
    made of. Every number is a model prediction, not a measurement."""

    machine: str
    world: int
    time_s: float = 0.0
    launches: int = 0
    """Kernels, library calls and copies the host issues."""
    bytes_sent: int = 0
    """Bytes one rank sends to other ranks."""
    timeline: list[Interval] = field(default_factory=list[Interval])

    def busy(self, kind: str) -> float:
        """The summed durations of one kind of work (overlapping or not)."""
        return sum(i.duration for i in self.timeline if i.kind == kind)

    @property
    def compute_s(self) -> float:
        return self.busy(COMPUTE)

    @property
    def communication_s(self) -> float:
        return self.busy(COMMUNICATION)

    @property
    def bound_s(self) -> float:
        """No schedule of this work beats the longer of its compute and its
        communication."""
        return max(self.compute_s, self.communication_s)

    def streams(self) -> Counter[str]:
        return Counter(i.stream for i in self.timeline)
