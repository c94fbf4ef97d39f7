"""The random program generator (`strategies.programs`) itself: its modules
verify and round-trip through text, the interpreter runs them with finite
results, and over many draws it covers every op, layout and element type (data
of each: arguments of every type, i32 arithmetic and all_reduce), the program
shapes the passes target and the named ops their `op=NAME` option targets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
from hypothesis import Phase, given, settings
from strategies import Program, programs, scaled_examples
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType, element_type_name
from coconet_ir.interpreter import equivalent, interpret
from coconet_ir.ir import parse, to_text, verify

COVERAGE_DRAWS = 400
"""Enough that the rarest feature (an i32 all_reduce: about 1 program in
80) is drawn under any hypothesis version's derandomized sequence."""

EVERY_OP = {
    *(f"coco.{name}" for name in ("add", "sub", "mul", "div", "max", "min", "pow")),
    *(f"coco.{name}" for name in ("neg", "abs", "sqrt", "rsqrt", "exp", "log")),
    *(f"coco.{name}" for name in ("tanh", "relu", "gelu", "cmp", "select")),
    *(f"coco.{name}" for name in ("convert", "constant", "dropout", "reduce")),
    *(f"coco.{name}" for name in ("norm", "matmul", "all_slice", "update")),
    *(f"coco.{name}" for name in ("all_reduce", "reduce_scatter", "all_gather")),
    *(f"coco.{name}" for name in ("broadcast", "all_to_all", "send", "recv")),
}
"""Every op a user writes (the region ops are made by passes)."""


@settings(max_examples=scaled_examples(60))
@given(program=programs())
def test_programs_verify_and_round_trip(program: Program):
    verify(program.module)
    text = to_text(program.module)
    assert to_text(parse(text)) == text


@settings(max_examples=scaled_examples(60))
@given(program=programs())
def test_interpreter_runs_programs_with_finite_results(program: Program):
    for world in program.worlds:
        run = interpret(program.module, world)
        for output in run.outputs.values():
            values = output.value.astype(np.float64)
            assert np.all(np.isfinite(values)), f"{output.key} on {world} ranks"
        assert equivalent(program.module, program.module.clone(), world).ok


def draw_many(count: int) -> list[Program]:
    """`count` programs, the same ones on every run."""
    drawn: list[Program] = []

    @settings(
        max_examples=count, derandomize=True, database=None, phases=[Phase.generate]
    )
    @given(program=programs())
    def collect(program: Program) -> None:
        drawn.append(program)

    collect()
    return drawn


def ops_of(module: ModuleOp) -> Iterator[Operation]:
    return (op for op in module.walk() if op is not module)


def producer_name(value: SSAValue) -> str | None:
    owner = value.owner
    return owner.name if isinstance(owner, Operation) else None


ELEMENTWISE = (
    coco.ElementwiseBinaryOp,
    coco.ElementwiseUnaryOp,
    coco.DropoutOp,
    coco.ConvertOp,
    coco.SelectOp,
)


def upstream(value: SSAValue) -> set[str]:
    """The ops `value` comes from through elementwise ops: the names of the
    elementwise ops and of the first non-elementwise producers."""
    found: set[str] = set()
    pending = [value]
    while pending:
        owner = pending.pop().owner
        if not isinstance(owner, Operation) or owner.name in found:
            continue
        found.add(owner.name)
        if isinstance(owner, ELEMENTWISE):
            pending.extend(owner.operands)
    return found


def features(program: Program) -> set[str]:
    """What one program exercises: op names, argument layouts and element
    types, and the shapes the passes target."""
    found: set[str] = set()
    for op in ops_of(program.module):
        found.add(op.name)
        for t in [*(o.type for o in op.operands), *(r.type for r in op.results)]:
            if isinstance(t, TensorType):
                found.add(element_type_name(t.element_type))
                found.add(f"layout {t.layout.kind.data}")
                found.add(f"rank {t.rank}")
        found |= target_shapes(op)
    for op in ops_of(program.module):
        for region in op.regions:
            for block in region.blocks:
                found |= {
                    f"{element_type_name(a.type.element_type)} argument"
                    for a in block.args
                    if isinstance(a.type, TensorType)
                }
        if "name" in op.attributes:
            found.add(f"named {op.name}")
        if isinstance(op, coco.AllReduceOp) and isinstance(op.operand.type, TensorType):
            found.add(f"{element_type_name(op.operand.type.element_type)} all_reduce")
    if len(list(program.module.ops)) == 2:
        found.add("pipeline")
    if coco.WORLD_SIZE_ATTR in program.module.attributes:
        found.add("world_size")
    return found


def gathered_dims(value: SSAValue, rank: int) -> set[int]:
    """The dims of a rank-`rank` elementwise result that the all_gathers
    `value` comes from (through elementwise ops) gathered along: dims align
    from the right, as broadcasting does."""
    found: set[int] = set()
    pending, seen = [value], set[Operation]()
    while pending:
        owner = pending.pop().owner
        if not isinstance(owner, Operation) or owner in seen:
            continue
        seen.add(owner)
        if isinstance(owner, coco.AllGatherOp):
            gathered = owner.operand.type
            assert isinstance(gathered, TensorType)
            found.add(gathered.layout.sliced_dim + rank - gathered.rank)
        elif isinstance(owner, ELEMENTWISE):
            pending.extend(owner.operands)
    return found


def combines_different_gathers(op: Operation) -> bool:
    """Whether the elementwise `op` combines values gathered along dims that do
    not line up in its result (coco-reorder cannot move it onto the slices)."""
    if not isinstance(op, ELEMENTWISE) or len(op.operands) < 2:
        return False
    result = op.results[0].type
    assert isinstance(result, TensorType)
    per_operand = [gathered_dims(operand, result.rank) for operand in op.operands]
    return any(
        a != b
        for i, dims in enumerate(per_operand)
        for others in per_operand[i + 1 :]
        for a in dims
        for b in others
    )


def target_shapes(op: Operation) -> set[str]:
    """The pass targets `op` completes."""
    found: set[str] = set()
    if isinstance(op, coco.UpdateOp) and "coco.all_reduce" in upstream(op.value):
        found.add("all_reduce -> elementwise -> update")
    if isinstance(op, coco.AllReduceOp) and producer_name(op.operand) == (
        "coco.matmul"
    ):
        found.add("matmul -> all_reduce")
    if isinstance(op, coco.ReduceScatterOp) and producer_name(op.operand) == (
        "coco.matmul"
    ):
        found.add("matmul -> reduce_scatter")
    if isinstance(op, coco.MatmulOp) and producer_name(op.lhs) == "coco.all_gather":
        found.add("all_gather -> matmul")
    if isinstance(op, coco.SendOp):
        if upstream(op.operand) & {"coco.all_reduce", "coco.all_gather"}:
            found.add("collective -> send")
    if combines_different_gathers(op):
        found.add("all_gathers along different dims -> elementwise")
    return found


def test_generator_covers_every_op_and_target_shape():
    counts: Counter[str] = Counter()
    for program in draw_many(COVERAGE_DRAWS):
        counts.update(features(program))
    expected = EVERY_OP | {
        "f32",
        "f64",
        "f16",
        "bf16",
        "i32",
        "i1",
        "bf16 argument",
        "i32 argument",
        "i1 argument",
        "i32 all_reduce",
        "named coco.all_reduce",
        "named coco.matmul",
        "named coco.update",
        "named coco.all_gather",
        "layout replicated",
        "layout local",
        "layout sliced",
        "rank 0",
        "rank 3",
        "pipeline",
        "world_size",
    }
    missing = sorted(expected - set(counts))
    assert not missing, f"never drawn in {COVERAGE_DRAWS} programs: {missing}"
    targets = [
        "all_reduce -> elementwise -> update",
        "matmul -> all_reduce",
        "matmul -> reduce_scatter",
        "all_gather -> matmul",
        "collective -> send",
        "all_gathers along different dims -> elementwise",
    ]
    rare = {t: counts[t] for t in targets if counts[t] < COVERAGE_DRAWS // 20}
    assert not rare, f"pass targets drawn too rarely: {rare}"
