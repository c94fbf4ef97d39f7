"""Every coco pass pipeline preserves semantics on random well-typed programs.

For each pipeline, hypothesis draws programs (`strategies.programs`), applies
the pipeline to a clone, and checks that

- the pipeline does not raise: without `op=NAME` a pass skips what it cannot
  transform, so any error on these programs is a bug;
- the result verifies;
- the interpreter finds the result equivalent to the original
  (docs/interpreter.md, "Equivalence") on 2, 4 and 8 ranks, within a tolerance set by
  the program's element types (reassociated sums round differently).

A failure prints the minimized program (`program=...`), the pipeline, the world
size, the first difference and the transformed program.

Targeting by name (`PASS{op=NAME}`, see coconet_ir/passes/base.py): for a name
some op of the program carries (or, rarely, one none carries), each pass either
succeeds (the result verifies and is equivalent, as above) or raises a
`CocoError` and leaves the module byte-identical; any other exception is a bug.

Budget: `FAST` pipelines run `scaled_examples(50)` programs each, `SLOW` ones
(many passes) 30, `TARGETED` ones 20; HYPOTHESIS_PROFILE=thorough runs 15
times more.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from networkx import connected_components
from strategies import (
    STAGE_NAMES,
    WORLDS,
    Program,
    programs,
    scaled_examples,
    stage_names_of,
)
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.dialects.coco import UpdateOp
from coconet_ir.interpreter import equivalent
from coconet_ir.ir import CocoError, make_context, parse, to_text, verify
from coconet_ir.pipeline import available_passes, build_pipeline

FAST = [
    "coco-split-all-reduce",
    "coco-split-all-reduce,coco-reorder",
    "coco-split-all-reduce,coco-reorder,coco-slice-state",
    "coco-split-all-reduce,coco-fuse",
    "coco-split-all-reduce,coco-reorder,coco-fuse",
    "coco-overlap{chunks=2}",
    "coco-overlap{per_peer=true}",
    "coco-split-all-reduce,coco-fuse-send",
    "coco-dce",
    "canonicalize",
    "cse",
]
"""Pipelines checked on `scaled_examples(50)` programs each."""

SLOW = ["coco-optimize"]
"""Pipelines that run many passes: `scaled_examples(30)` programs each."""


@pytest.fixture(scope="module")
def pipeline(request: pytest.FixtureRequest) -> PassPipeline:
    """The pipeline `request.param` (coco's and xDSL's passes)."""
    return build_pipeline(available_passes(), request.param)


def spec_of(pipeline: PassPipeline) -> str:
    """The pipeline as a `-p` string, with its options."""
    return ",".join(str(p.pipeline_pass_spec()) for p in pipeline.passes)


def check_preserves_semantics(pipeline: PassPipeline, program: Program) -> None:
    """Apply `pipeline` to a clone of the program; the clone must verify and
    be equivalent to the original on every world size of the program."""
    spec = spec_of(pipeline)
    transformed = program.module.clone()
    try:
        pipeline.apply(make_context(), transformed)
    except Exception as err:
        pytest.fail(f"{spec} raised on an untargeted program: {err}")
    check_equivalent(spec, program, transformed)


def check_equivalent(spec: str, program: Program, transformed: ModuleOp) -> None:
    """`transformed` verifies and is equivalent to the program on every world
    size of the program."""
    verify(transformed)
    for world in program.worlds:
        result = equivalent(
            program.module,
            transformed,
            world,
            rtol=program.rtol,
            atol=program.atol,
        )
        if not result.ok:
            assert result.first_difference is not None
            pytest.fail(
                f"{spec} changed the semantics on {world} ranks: "
                f"{result.first_difference.message}\n"
                f"--- transformed program:\n{to_text(transformed)}"
            )


@pytest.mark.parametrize("pipeline", FAST, indirect=True)
@settings(max_examples=scaled_examples(50))
@given(program=programs())
def test_pipeline_preserves_semantics(pipeline: PassPipeline, program: Program):
    check_preserves_semantics(pipeline, program)


@pytest.mark.parametrize("pipeline", SLOW, indirect=True)
@settings(max_examples=scaled_examples(30))
@given(program=programs())
def test_slow_pipeline_preserves_semantics(pipeline: PassPipeline, program: Program):
    check_preserves_semantics(pipeline, program)


def predicted(module: ModuleOp, world: int) -> dict[str, float]:
    """Each function's predicted time on `world` ranks of the default machine."""
    from coconet_ir.costmodel.machines import DEFAULT_MACHINE, machine
    from coconet_ir.costmodel.predict import predict

    found = predict(module, machine(DEFAULT_MACHINE), world)
    return {name: p.time_s for name, p in found.items()}


@settings(max_examples=scaled_examples(30))
@given(program=programs(), pick=st.integers(0, 2))
def test_coco_optimize_is_never_predicted_slower(program: Program, pick: int):
    """Issue 27: coco-optimize never predicts a function slower than it was
    written (the pipeline stages by their slowest); with `never_slower=false`
    it may."""
    world = program.worlds[pick % len(program.worlds)]
    optimized = program.module.clone()
    build_pipeline(available_passes(), f"coco-optimize{{world={world}}}").apply(
        make_context(), optimized
    )
    before, after = predicted(program.module, world), predicted(optimized, world)
    stages = PipelineChannels.of(program.module).stages()
    for group in connected_components(stages):
        was = max(before[name] for name in group)
        now = max(after[name] for name in group)
        assert now <= was * (1 + 1e-9), (sorted(group), was, now)


TARGETED = [
    "coco-split-all-reduce{op=NAME}",
    "coco-reorder{op=NAME}",
    "coco-split-all-reduce,coco-reorder{op=NAME_ag}",
    "coco-fuse{op=NAME}",
    "coco-split-all-reduce,coco-fuse{op=NAME_rs}",
    "coco-overlap{chunks=2 op=NAME}",
    "coco-overlap{per_peer=true op=NAME}",
    "coco-split-all-reduce,coco-fuse-send{op=NAME}",
    "coco-slice-state{op=NAME}",
    "coco-split-all-reduce,coco-reorder,coco-slice-state{op=NAME}",
    "coco-dce{op=NAME}",
]
"""Pipelines whose last pass targets the ops named NAME, after untargeted
passes that make its targets (coco-split-all-reduce names the halves of an
all_reduce named N `N_rs` and `N_ag`); `scaled_examples(20)` programs each."""


@st.composite
def named_programs(draw: st.DrawFn) -> tuple[Program, str]:
    """A program and a name to target: one its ops carry, or (one time in
    eight, or when no op is named) a name no op carries."""
    program = draw(programs())
    present = stage_names_of(program.module)
    if present and draw(st.integers(0, 7)) != 7:
        return program, draw(st.sampled_from(present))
    return program, draw(st.sampled_from(STAGE_NAMES))


@pytest.mark.parametrize("spec", TARGETED)
@settings(max_examples=scaled_examples(20))
@given(drawn=named_programs())
def test_targeted_pass_succeeds_or_refuses_cleanly(
    spec: str, drawn: tuple[Program, str]
):
    program, name = drawn
    pipeline = build_pipeline(available_passes(), spec.replace("NAME", name))
    full_spec = spec_of(pipeline)
    *untargeted, targeted = pipeline.passes
    transformed = program.module.clone()
    try:
        PassPipeline(tuple(untargeted)).apply(make_context(), transformed)
    except Exception as err:
        pytest.fail(f"{full_spec}: an untargeted pass raised: {err}")
    before = to_text(transformed)
    try:
        targeted.apply(make_context(), transformed)
    except CocoError:
        after = to_text(transformed)
        assert after == before, f"{full_spec} refused but changed the module:\n{after}"
        return
    except Exception as err:
        pytest.fail(f"{full_spec} raised {type(err).__name__}, not CocoError: {err}")
    try:  # what a driver does after each pass: a refusal is not a broken result
        verify(transformed)
    except CocoError as err:
        pytest.fail(f"{full_spec} produced IR that does not verify: {err}")
    check_equivalent(full_spec, program, transformed)


SGD = """
func.func @sgd(%g: !coco.tensor<16xf32, local>, %w: !coco.tensor<16xf32, replicated>,
               %lr: !coco.tensor<f32, replicated>) {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
  %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  %w1 = coco.sub %w, %d : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<16xf32, replicated>
  func.return
}
"""  # noqa: E501


@dataclass(frozen=True)
class DropUpdates(ModulePass):
    """A wrong pass: erases every coco.update."""

    name = "test-drop-updates"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for update in [o for o in op.walk() if isinstance(o, UpdateOp)]:
            update.detach()
            update.erase()


def test_the_property_catches_a_wrong_pass():
    """The property can fail: a pass that drops the update is reported."""
    program = Program(parse(SGD), WORLDS, 1e-4, 2e-3)
    with pytest.raises(pytest.fail.Exception, match="changed the semantics"):
        check_preserves_semantics(PassPipeline((DropUpdates(),)), program)
