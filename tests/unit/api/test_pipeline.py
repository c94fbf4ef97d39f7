"""cc.Pipeline: built from the -p syntax or from pass instances; applies in place
or to a copy; bad specs are CocoErrors that say, in words and in the API's
context, which pass or option is wrong and what it expects."""

import pytest
from helpers import EXAMPLES_DIR
from xdsl.utils.arg_spec import parse_pipeline

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.passes.overlap import Overlap
from coconet_ir.passes.reorder import Reorder
from coconet_ir.passes.slice_state import SliceState
from coconet_ir.passes.split_all_reduce import SplitAllReduce
from coconet_ir.pipeline import (
    PassOption,
    PassSpecError,
    accepted_values,
    available_passes,
    parse_passes,
    pass_options,
)

SGD = EXAMPLES_DIR / "sgd.mlir"


def test_string_and_instances_give_the_same_program():
    module = cc.parse_file(str(SGD))
    by_text = cc.Pipeline("coco-split-all-reduce{dim=0},coco-reorder")(module)
    by_instances = cc.Pipeline([SplitAllReduce(dim=0), Reorder()])(module)
    mixed = cc.Pipeline([SplitAllReduce(dim=0), "coco-reorder"])(module)
    assert cc.to_text(by_text) == cc.to_text(by_instances) == cc.to_text(mixed)
    assert str(cc.Pipeline([SplitAllReduce(dim=0), Reorder()])) == (
        "coco-split-all-reduce{dim=0},coco-reorder"
    )


def test_call_copies_and_apply_changes_in_place():
    module = cc.parse_file(str(SGD))
    text = cc.to_text(module)
    pipeline = cc.Pipeline("coco-split-all-reduce")
    copy = pipeline(module)
    assert cc.to_text(module) == text
    assert pipeline.apply(module) is module
    assert cc.to_text(module) == cc.to_text(copy)
    assert any(isinstance(op, coco.ReduceScatterOp) for op in module.walk())


def test_xdsl_passes_are_available():
    module = cc.parse_file(str(SGD))
    cc.Pipeline("coco-split-all-reduce,canonicalize,cse")(module)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "coco-splt-all-reduce",
            "cc.Pipeline: unknown pass 'coco-splt-all-reduce' (did you mean "
            "'coco-split-all-reduce'?); coconet_ir.pipeline.available_passes() "
            "lists them",
        ),
        (
            "coco-split-all-reduce{dim=x}",
            "cc.Pipeline: pass 'coco-split-all-reduce': option 'dim' expects an "
            "integer, got 'x'",
        ),
        (
            "coco-overlap{chunks=abc}",
            "cc.Pipeline: pass 'coco-overlap': option 'chunks' expects an integer, "
            "got 'abc'",
        ),
        (
            "coco-fuse{foo=1}",
            "cc.Pipeline: pass 'coco-fuse' has no option 'foo' (its options: op, "
            "reductions, collectives, ops)",
        ),
        (
            "cse{",
            "cc.Pipeline: bad pass pipeline 'cse{' at column 5: Expected argument "
            "name here",
        ),
    ],
)
def test_bad_specs(spec: str, message: str):
    with pytest.raises(cc.CocoError) as caught:
        cc.Pipeline(spec)
    assert str(caught.value) == f"error: {message}"
    assert "coconet-opt --help" not in str(caught.value)


def test_unknown_pass_in_a_list_of_passes():
    with pytest.raises(
        PassSpecError, match=r"^error: cc\.Pipeline: unknown pass 'nope'"
    ):
        cc.Pipeline([SplitAllReduce(), "nope"])


def test_the_command_line_wording_points_at_help():
    with pytest.raises(PassSpecError) as caught:
        parse_passes(available_passes(), "coco-nope")
    assert str(caught.value).startswith("error: unknown pass 'coco-nope'")
    assert str(caught.value).endswith("(`coconet-opt --help` lists them)")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("coco-overlap{chunk=2}", "has no option 'chunk' (did you mean 'chunks'? "),
        ("cse{foo=1}", "pass 'cse' has no option 'foo' (it takes none)"),
        ("coco-overlap{chunks=true}", "option 'chunks' expects an integer, got 'true'"),
        ("coco-overlap{chunks}", "option 'chunks' expects an integer, got no value"),
        ("coco-overlap{chunks=1,2}", "option 'chunks' expects an integer, got '1,2'"),
        ("coco-overlap{chunks=2.5}", "option 'chunks' expects an integer, got '2.5'"),
        (
            "coco-optimize{split=1}",
            "option 'split' expects a boolean (true or false), got '1'",
        ),
        (
            "coco-reorder{op=12}",
            "option 'op' expects a string, got '12' (quote it for a string: op=\"12\")",
        ),
        (
            "stencil-shape-minimize{restrict=a}",
            "option 'restrict' expects a comma-separated list of integers, got 'a'",
        ),
        (
            "csl-stencil-to-csl-wrapper{target=x}",
            "option 'target' expects one of 'wse2', 'wse3', got 'x'",
        ),
        (
            "apply-individual-rewrite",
            "pass 'apply-individual-rewrite' needs option 'matched_operation_index' "
            "(an integer)",
        ),
    ],
)
def test_bad_options_in_words(spec: str, message: str):
    with pytest.raises(PassSpecError) as caught:
        parse_passes(available_passes(), spec)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("coco-overlap{dim}", Overlap(dim=None)),
        ("coco-overlap{chunks=2 dim=1 op=layer}", Overlap(op="layer", chunks=2, dim=1)),
        ('coco-reorder{op="12"}', Reorder(op="12")),
        ("coco-slice-state{weights=true}", SliceState(weights=True)),
    ],
)
def test_good_options(spec: str, expected):
    assert parse_passes(available_passes(), spec) == (expected,)


PASSES = available_passes()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # xDSL's test pass warns
@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_option_is_described_and_round_trips(name: str):
    """For every pass, coco's and xDSL's: each option's kind is words, not a
    Python type; a value of the wrong kind names the option; and the spec of
    the default pass parses back to it."""
    pass_class = PASSES[name]()
    options = pass_options(pass_class)
    required = {o.name: value_for(o, accepted=True) for o in options if o.required}
    for option in options:
        assert "<" not in option.kind and "typing" not in option.kind, option
        wrong = value_for(option, accepted=False)
        given = {**required, option.name: wrong}
        spec = f"{name}{{{' '.join(f'{k}={v}' for k, v in given.items())}}}"
        with pytest.raises(PassSpecError, match=f"option '{option.name}' expects"):
            parse_passes(PASSES, spec)
    if not required:
        default = pass_class()
        spec = str(default.pipeline_pass_spec(include_default=True))
        assert parse_passes(PASSES, spec) == (default,)


def value_for(option: PassOption, accepted: bool) -> str:
    """A `-p` value that `option` accepts, or one it rejects."""
    return next(
        value
        for value in ("zzz", "1,2", "true", "1", '"s"', "wse2")
        if (accepted_values(parse_value(value), option.hint) is not None) == accepted
    )


def parse_value(text: str) -> tuple:
    """A pass option value as the `-p` syntax reads it."""
    (spec,) = parse_pipeline(f"p{{x={text}}}")
    return spec.parameters["x"]


@pytest.mark.parametrize("passes", [3, ["coco-dce", 3]])
def test_a_pipeline_of_something_else_is_a_coco_error(passes):
    with pytest.raises(cc.CocoError, match="expected a pass pipeline string"):
        cc.Pipeline(passes)
