"""The cost model: predicted times of coco programs, tensor level and device
level, on described machines (docs/performance.md)."""

from coconet_ir.costmodel.machines import DEFAULT_MACHINE, PRESETS, Machine, machine
from coconet_ir.costmodel.predict import predict, total_time
from coconet_ir.costmodel.timeline import Interval, Prediction

__all__ = [
    "DEFAULT_MACHINE",
    "PRESETS",
    "Interval",
    "Machine",
    "Prediction",
    "machine",
    "predict",
    "total_time",
]
