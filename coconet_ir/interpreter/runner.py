"""Running a program on N simulated ranks: `interpret()`.

Each function of the run is one pipeline stage with its own group of N ranks
and its own xDSL `Interpreter`. The scheduler steps the stages cooperatively,
op by op in program order: a `coco.send` is buffered (it never blocks), a
`coco.recv` (or an op holding one in a nested region) blocks its stage until the
matching message has been sent. When every unfinished stage is blocked the run
ends with a "deadlock" error naming the waiting receives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.ir import Operation

from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType
from coconet_ir.interpreter.context import Mailbox, StageContext, set_stage_context
from coconet_ir.interpreter.inputs import (
    argument_key,
    check_world,
    prepare_inputs,
    result_key,
)
from coconet_ir.interpreter.ops import CocoFunctions
from coconet_ir.interpreter.regions import RegionFunctions
from coconet_ir.interpreter.stages import (
    check_divisible,
    check_rules,
    check_world_attribute,
    describe,
    select_functions,
)
from coconet_ir.interpreter.values import DistValue, promoted_precision

EXTRA_FUNCTIONS: list[InterpreterFunctions] = []
"""Implementations other modules add (e.g. for fusion or chunked regions)."""


def register_functions(functions: InterpreterFunctions) -> None:
    """Give the interpreter the rules of more ops (an `@register_impls`
    `InterpreterFunctions` instance); its ops may use `stage_context()` and the
    `DistValue` helpers. Registering the same class twice is a no-op."""
    if any(type(f) is type(functions) for f in EXTRA_FUNCTIONS):
        return
    EXTRA_FUNCTIONS.append(functions)


def all_functions() -> list[InterpreterFunctions]:
    return [CocoFunctions(), RegionFunctions(), *EXTRA_FUNCTIONS]


def all_rules() -> dict[type[Operation], object]:
    rules: dict[type[Operation], object] = {}
    for functions in all_functions():
        rules.update(dict(type(functions)._impls()))
    return rules


@dataclass(frozen=True)
class Output:
    """One output of a run: a result or an updated parameter.

    `value` is the global value for replicated/sliced types and the per-rank
    values stacked `(N, *shape)` for local ones."""

    key: str
    type: TensorType
    value: np.ndarray


@dataclass
class RunResult:
    """What a run produced (`outputs`) from what it was fed (`inputs`)."""

    outputs: dict[str, Output]
    inputs: dict[str, np.ndarray]
    world: int = 1

    def __getitem__(self, key: str) -> np.ndarray:
        """The value of output `key`."""
        return self.outputs[key].value


@dataclass
class Stage:
    """One function being stepped on its own group of ranks."""

    func: FuncOp
    interpreter: Interpreter
    context: StageContext
    ops: list[Operation]
    cursor: int = 0
    results: tuple[DistValue, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return self.func.sym_name.data

    @property
    def finished(self) -> bool:
        return self.cursor >= len(self.ops)

    @property
    def current(self) -> Operation:
        return self.ops[self.cursor]

    def waiting_on(self) -> list[coco.RecvOp]:
        """The receives of the next op whose message has not arrived."""
        mailbox, channels = self.context.mailbox, self.context.channels
        return [
            op
            for op in self.current.walk()
            if isinstance(op, coco.RecvOp) and not mailbox.ready(channels.channel(op))
        ]

    def step(self) -> None:
        """Run the next op."""
        op = self.current
        self.cursor += 1
        values = self.interpreter.get_values(op.operands)
        if isinstance(op, ReturnOp):
            self.results = values
            self.cursor = len(self.ops)
            return
        outputs = self.interpreter.run_op(op, values)
        self.interpreter.set_values(zip(op.results, outputs))

    def run_until_blocked(self) -> bool:
        """Run ops until the stage ends or waits; whether any op ran."""
        progressed = False
        while not self.finished and not self.waiting_on():
            self.step()
            progressed = True
        return progressed


def start_stage(
    func: FuncOp,
    module: ModuleOp,
    world: int,
    mailbox: Mailbox,
    channels: PipelineChannels,
    fed: dict[str, np.ndarray],
) -> Stage:
    interpreter = Interpreter(module)
    for functions in all_functions():
        interpreter.register_implementations(functions)
    context = StageContext(func.sym_name.data, world, mailbox, channels)
    set_stage_context(interpreter, context)
    block = func.body.block
    arguments = []
    for position, arg in enumerate(block.args):
        assert isinstance(arg.type, TensorType)
        value = fed[argument_key(func, position)]
        arguments.append(DistValue.from_global(arg.type, value, world))
    interpreter.set_values(zip(block.args, arguments))
    return Stage(func, interpreter, context, list(block.ops))


def run_stages(stages: list[Stage]) -> None:
    """Step the stages until all finish; raise on a deadlock."""
    while True:
        unfinished = [s for s in stages if not s.finished]
        if not unfinished:
            return
        progressed = [s.run_until_blocked() for s in unfinished]
        if not any(progressed):
            raise deadlock_error(unfinished)


def deadlock_error(blocked: list[Stage]) -> CocoError:
    waits = []
    for stage in blocked:
        for recv in stage.waiting_on():
            waits.append(f"@{stage.name} waits at {describe(recv)}")
    return CocoError(
        "deadlock: every unfinished stage is blocked on a coco.recv whose "
        "coco.send has not run: " + "; ".join(waits)
    )


def collect_outputs(stages: list[Stage]) -> dict[str, Output]:
    """Results then updated parameters, function by function."""
    outputs: dict[str, Output] = {}
    for stage in stages:
        returned = [(result_key(stage.func, i), v) for i, v in enumerate(stage.results)]
        updated = [
            (argument_key(stage.func, i), stage.context.updates[i])
            for i in sorted(stage.context.updates)
        ]
        for key, value in [*returned, *updated]:
            outputs[key] = Output(key, value.type, value.global_value())
    return outputs


def interpret(
    module: ModuleOp,
    world: int,
    *,
    inputs: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    entry: str | None = None,
    promoted: bool = False,
) -> RunResult:
    """Run `module` on `world` simulated ranks (see the module docstring).

    `inputs` overrides drawn arguments by key `FUNC.argI` (global values;
    `(N, *shape)` for local arguments). `promoted=True` holds f32 values as
    f64 and computes every float in f64 (halves still rounded to their type
    after each op), as an equivalence check does: the inputs are the same
    (f32-rounded) values, the outputs of f32 type are f64 arrays. Raises
    `CocoError` on a bad request or program."""
    check_world(world)
    check_world_attribute(module, world)
    channels = PipelineChannels.of(module)
    functions = select_functions(module, entry, channels)
    check_divisible(functions, world)
    check_rules(functions, all_rules())
    fed = prepare_inputs(functions, world, seed, inputs)
    mailbox = Mailbox()
    with promoted_precision(promoted):
        stages = [
            start_stage(f, module, world, mailbox, channels, fed) for f in functions
        ]
        try:
            with np.errstate(all="ignore"):
                run_stages(stages)
        except CocoError as err:
            if hasattr(err, "__notes__"):
                del err.__notes__  # xDSL appends a dump of the whole module
            raise
        return RunResult(collect_outputs(stages), fed, world)
