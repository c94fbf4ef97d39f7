"""cc.parse: every op gets the `file:line:col` of its first token, and a value
used but never defined is an error at its first use."""

import pytest
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.ir import LocatingParser, location_of, make_context

R = "!coco.tensor<8xf32, replicated>"

PROGRAM = f"""// a comment

func.func @f(%a: {R}, %b: {R}) -> {R} {{
  %c = coco.add %a, %b : ({R}, {R}) -> {R}
    %d = coco.fusion (%c) : ({R}) -> ({R}) {{
    ^bb0(%x: {R}):
         %y = coco.neg %x : ({R}) -> {R}
      coco.yield %y : {R}
    }}
  func.return %d : {R}
}}
func.func @g() {{ func.return }}
"""

LOCATIONS = [
    ("func.func", 3, 1),
    ("coco.add", 4, 3),
    ("coco.fusion", 5, 5),
    ("coco.neg", 7, 10),
    ("coco.yield", 8, 7),
    ("func.return", 10, 3),
    ("func.func", 12, 1),
    ("func.return", 12, 18),
]
"""(op, line, column) of every op of PROGRAM but the implicit module."""


def expected_locations(name: str, line_offset: int = 0) -> list[tuple[str, str]]:
    return [
        (op, f"{name}:{line + line_offset}:{column}") for op, line, column in LOCATIONS
    ]


def located_ops(module: ModuleOp) -> list[tuple[str, str]]:
    return [(op.name, location_of(op)) for op in module.walk() if op is not module]


def test_every_op_is_located_at_its_first_token():
    module = cc.parse(PROGRAM, "p.mlir")
    assert located_ops(module) == expected_locations("p.mlir")


def test_line_offset_shifts_the_lines():
    """A --split-input-file chunk counts lines from the start of the file."""
    module = LocatingParser(make_context(), PROGRAM, "p.mlir", 40).parse_module()
    assert located_ops(module) == expected_locations("p.mlir", 40)


def test_locations_of_a_long_chain():
    """Line starts are looked up, not counted: the last lines are right too."""
    lines = [f"func.func @chain(%v0: {R}) -> {R} {{"]
    lines += [
        f"  %v{i} = coco.add %v{i - 1}, %v0 : ({R}, {R}) -> {R}" for i in range(1, 3000)
    ]
    lines += [f"  func.return %v2999 : {R}", "}"]
    module = cc.parse("\n".join(lines), "chain.mlir")
    ops = list(module.walk())[1:]
    assert [location_of(op) for op in ops] == [
        "chain.mlir:1:1",
        *(f"chain.mlir:{line}:3" for line in range(2, 3002)),
    ]


def test_undefined_value_is_reported_at_its_first_use():
    text = PROGRAM.replace("coco.add %a, %b", "coco.add %a, %zz")
    with pytest.raises(cc.CocoError, match=r"^p\.mlir:4:21: error: use of undefined "):
        cc.parse(text, "p.mlir")


def test_undefined_value_at_the_top_level():
    """Ops outside a function (in the implicit module's body) are checked too."""
    text = f"%c = coco.neg %nope : ({R}) -> {R}\n"
    with pytest.raises(cc.CocoError, match=r"^p\.mlir:1:15: error: .* '%nope'"):
        cc.parse(text, "p.mlir")


def test_empty_block_needs_a_terminator():
    """As xdsl-opt and mlir-opt, although ops are verified one at a time."""
    with pytest.raises(
        cc.CocoError,
        match=r"^p\.mlir:1:1: error: 'func.func' op empty block: expect at least a ",
    ):
        cc.parse("func.func @f() {\n^bb0:\n}\n", "p.mlir")


@pytest.mark.parametrize("text", ["", " \n\t\n", "// only\n  // comments\r\n"])
def test_blanks_and_comments_are_empty_input(text: str):
    with pytest.raises(cc.CocoError, match=r"^p\.mlir: error: empty input"):
        cc.parse(text, "p.mlir")


def test_code_after_comments_is_not_empty():
    module = cc.parse("// a comment\n  // another\nfunc.func @f() { func.return }")
    assert [op.name for op in module.walk()][1:] == ["func.func", "func.return"]


def test_undefined_value_before_file_metadata():
    """MLIR prints `{-# ... #-}` (resources) after the module."""
    metadata = "{-#\n  dialect_resources: {}\n#-}\n"
    text = f"%c = coco.neg %nope : ({R}) -> {R}\n{metadata}"
    with pytest.raises(cc.CocoError, match=r"^p\.mlir:1:15: error: .* '%nope'"):
        cc.parse(text, "p.mlir")
