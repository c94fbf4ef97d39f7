"""coconet-opt as users run it: a subprocess, its exit code, stdout and stderr.

Every kind of bad input ends in one located diagnostic and a non-zero exit,
never a Python traceback; the xdsl-opt flags work.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR, assert_clean_error, tool_command, write

T = "!coco.tensor<16x4xf32, {}>"
LOCAL, REPL = T.format("local"), T.format("replicated")

ALL_REDUCE = f"""
func.func @f(%g: {LOCAL}) -> {REPL} {{
  %s = coco.all_reduce %g reduction = sum : {LOCAL} -> {REPL}
  func.return %s : {REPL}
}}
"""

VERIFY_ERROR = f"""
func.func @f(%g: {LOCAL}) -> {LOCAL} {{
  %s = coco.all_reduce %g reduction = sum : {LOCAL} -> {LOCAL}
  func.return %s : {LOCAL}
}}
"""

UNDEFINED_VALUE = f"""
func.func @f(%g: {REPL}) -> {REPL} {{
  %s = coco.add %g, %zz : ({REPL}, {REPL}) -> {REPL}
  %t = coco.add %zz, %s : ({REPL}, {REPL}) -> {REPL}
  func.return %t : {REPL}
}}
"""

BAD_INPUTS: dict[str, tuple[bytes | None, str]] = {
    # kind: (file contents, None for a missing file; expected message part)
    "syntax": (b"func.func @f( {\n", "bad.mlir:1:15: error: Expected argument"),
    "verifier": (
        VERIFY_ERROR.encode(),
        "bad.mlir:3:3: error: 'coco.all_reduce' op",
    ),
    "unknown-op": (
        b"func.func @f() {\n  coco.frobnicate\n}\n",
        "bad.mlir:2:",
    ),
    "garbage": (bytes(range(256)) * 4, "bad.mlir: error: input is not UTF-8"),
    "truncated": (ALL_REDUCE.encode()[:120], "bad.mlir:3:"),
    "undefined-value": (
        UNDEFINED_VALUE.encode(),
        "bad.mlir:3:21: error: use of undefined value '%zz'",
    ),
    "empty": (b"", "bad.mlir: error: empty input"),
    "missing": (None, "bad.mlir: error: No such file or directory"),
}


def coconet_opt(*args: str | Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """Run the tool as an installed user would (`tool_command`)."""
    proc = subprocess.run(
        [*tool_command("coconet-opt"), *map(str, args)],
        capture_output=True,
        input=stdin,
        timeout=120,
    )
    proc.stdout = proc.stdout.decode()
    proc.stderr = proc.stderr.decode()
    return proc


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_input_gives_one_diagnostic(tmp_path: Path, kind: str):
    contents, message = BAD_INPUTS[kind]
    assert_clean_error(coconet_opt(write(tmp_path, "bad.mlir", contents)), message)


def test_unknown_op_names_the_op(tmp_path: Path):
    contents, _ = BAD_INPUTS["unknown-op"]
    proc = coconet_opt(write(tmp_path, "bad.mlir", contents))
    assert_clean_error(proc, "coco.frobnicate is not registered")


def test_verifier_error_names_the_rule(tmp_path: Path):
    proc = coconet_opt(write(tmp_path, "bad.mlir", VERIFY_ERROR))
    assert_clean_error(proc, "by the layout rules")


@pytest.mark.parametrize("args", [(), ("-",)], ids=["no-file", "dash"])
def test_garbage_on_stdin(args: tuple[str, ...]):
    proc = coconet_opt(*args, stdin=b"\xff\xfe\x00")
    assert_clean_error(proc, "<stdin>: error: input is not")


@pytest.mark.parametrize("args", [(), ("-",)], ids=["no-file", "dash"])
def test_reads_standard_input(args: tuple[str, ...]):
    """`coconet-opt -` and `coconet-opt` read standard input, as mlir-opt
    does; its diagnostics name `<stdin>`."""
    proc = coconet_opt(*args, "-p", "coco-split-all-reduce", stdin=ALL_REDUCE.encode())
    assert proc.returncode == 0, proc.stderr
    assert "coco.reduce_scatter" in proc.stdout
    proc = coconet_opt(*args, stdin=VERIFY_ERROR.encode())
    assert_clean_error(proc, "<stdin>:3:3: error: 'coco.all_reduce' op")


def test_print_between_passes_with_debuginfo_shows_carried_locations(tmp_path: Path):
    """After coco-split-all-reduce, the reduce_scatter and all_gather it made
    are at the all_reduce's line (docs/passes.md, "Locations after a pass")."""
    path = write(tmp_path, "prog.mlir", ALL_REDUCE)
    pipeline = "coco-split-all-reduce,canonicalize"
    proc = coconet_opt(
        path, "-p", pipeline, "--print-between-passes", "--print-debuginfo"
    )
    assert proc.returncode == 0, proc.stderr
    between = proc.stdout.split("IR after coco-split-all-reduce:")[1]
    at_all_reduce = f'loc("{path}":3:3)'
    for op in ("coco.reduce_scatter", "coco.all_gather"):
        line = next(x for x in between.splitlines() if op in x)
        assert line.endswith(at_all_reduce), line


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("nope", "unknown pass 'nope'"),
        ("canonicalise", "did you mean 'canonicalize'"),
        ("cse,,", "pass-pipeline:1:5: error: bad pass pipeline"),
        ("canonicalize{", "pass-pipeline:1:14: error: bad pass pipeline"),
        ("canonicalize{foo=1}", "error: pass 'canonicalize' has no option 'foo'"),
        (
            "coco-overlap{chunks=abc}",
            "coconet-opt: error: pass 'coco-overlap': option 'chunks' expects an "
            "integer, got 'abc'",
        ),
        (
            "coco-fuse{foo=1}",
            "coconet-opt: error: pass 'coco-fuse' has no option 'foo' (its options: "
            "op, reductions, collectives, ops)",
        ),
        ("coco-nope", "(`coconet-opt --help` lists them)"),
    ],
)
def test_bad_pipeline(tmp_path: Path, pipeline: str, message: str):
    proc = coconet_opt(write(tmp_path, "p.mlir", ALL_REDUCE), "-p", pipeline)
    assert_clean_error(proc, message)


def test_unknown_target_is_usage_error(tmp_path: Path):
    proc = coconet_opt(write(tmp_path, "p.mlir", ALL_REDUCE), "-t", "nope")
    assert_clean_error(proc, "argument -t/--target: invalid choice", code=2)


def test_unwritable_output(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE)
    out = tmp_path / "no" / "dir" / "out.mlir"
    proc = coconet_opt(path, "-o", out)
    assert_clean_error(
        proc, f"{out}: error: cannot write: the directory {out.parent} does not exist"
    )
    proc = coconet_opt(path, "-o", tmp_path)
    assert_clean_error(proc, f"{tmp_path}: error: Is a directory")


def test_round_trip_and_output_file(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE)
    out = tmp_path / "out.mlir"
    proc = coconet_opt(path, "-t", "mlir", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    again = coconet_opt(out)
    assert again.returncode == 0, again.stderr
    assert again.stdout == out.read_text()
    assert "coco.all_reduce %g reduction = sum" in again.stdout


SGD = EXAMPLES_DIR / "sgd.mlir"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "coco-reorder{op=nope}"], 'no op named "nope"'),
        (["-p", "coco-overlap{chunks=abc}"], "option 'chunks' expects an integer"),
        (["--print-op-generic", "-p", "canonicalize,coco-fuse{op=nope}"], "nope"),
    ],
)
def test_output_file_is_kept_when_the_run_fails(
    tmp_path: Path, args: list[str], message: str
):
    out = write(tmp_path, "out.mlir", "// the previous output\n")
    proc = coconet_opt(SGD, *args, "-o", out)
    assert_clean_error(proc, message)
    assert out.read_text() == "// the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir"]


def test_output_file_is_kept_on_bad_input(tmp_path: Path):
    out = write(tmp_path, "out.mlir", "// the previous output\n")
    proc = coconet_opt(write(tmp_path, "bad.mlir", VERIFY_ERROR), "-o", out)
    assert_clean_error(proc, "by the layout rules")
    assert out.read_text() == "// the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir", "out.mlir"]


def test_output_file_is_replaced_on_success(tmp_path: Path):
    out = write(tmp_path, "out.mlir", "// the previous output\n")
    out.chmod(0o640)
    proc = coconet_opt(SGD, "-p", "coco-split-all-reduce", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "coco.reduce_scatter" in out.read_text()
    assert "previous" not in out.read_text()
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir"]


def test_output_file_that_is_a_directory(tmp_path: Path):
    proc = coconet_opt(SGD, "-o", tmp_path)
    assert_clean_error(proc, f"{tmp_path}: error: Is a directory")


def test_print_op_generic(tmp_path: Path):
    proc = coconet_opt(write(tmp_path, "p.mlir", ALL_REDUCE), "--print-op-generic")
    assert proc.returncode == 0, proc.stderr
    assert '"coco.all_reduce"(%g) <{reduction = #coco<reduction sum>}>' in proc.stdout


def test_passes_and_their_flags(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE)
    proc = coconet_opt(
        path, "-p", "canonicalize,cse", "--print-between-passes", "--time-passes"
    )
    assert proc.returncode == 0, proc.stderr
    assert "IR after canonicalize:" in proc.stdout
    assert "Pass cse took" in proc.stdout


def test_split_input_file_locates_errors_in_the_whole_file(tmp_path: Path):
    text = f"{ALL_REDUCE}\n// -----\n{VERIFY_ERROR}"
    path = write(tmp_path, "split.mlir", text)
    line = text.splitlines().index(VERIFY_ERROR.splitlines()[2]) + 1
    proc = coconet_opt(path, "--split-input-file")
    assert_clean_error(proc, f"split.mlir:{line}:3: error: 'coco.all_reduce' op")
    assert "// -----" in proc.stdout
    diag = coconet_opt(path, "--split-input-file", "--verify-diagnostics")
    assert diag.returncode == 0, diag.stderr
    assert f"split.mlir:{line}:3: error: 'coco.all_reduce' op" in diag.stdout
    assert "func.func @f" in diag.stdout


def test_undefined_value_is_located_at_its_first_use(tmp_path: Path):
    """At the use (not at the end of the file), in the whole file's lines, with
    the source line and a caret under the name."""
    text = f"{ALL_REDUCE}\n// -----\n{UNDEFINED_VALUE}"
    path = write(tmp_path, "split.mlir", text)
    line = text.splitlines().index(UNDEFINED_VALUE.splitlines()[2]) + 1
    message = f"split.mlir:{line}:21: error: use of undefined value '%zz'"
    for args in ([], ["--split-input-file"]):
        proc = coconet_opt(path, *args)
        assert_clean_error(proc, message)
        assert proc.stderr.splitlines()[1:] == [
            UNDEFINED_VALUE.splitlines()[2],
            " " * 20 + "^^^",
        ]


def test_value_of_an_inner_region_is_undefined_outside(tmp_path: Path):
    text = f"""
func.func @f(%g: {REPL}) -> {REPL} {{
  %r = coco.fusion (%g) : ({REPL}) -> ({REPL}) {{
  ^bb0(%x: {REPL}):
    %y = coco.neg %x : ({REPL}) -> {REPL}
    coco.yield %y : {REPL}
  }}
  func.return %y : {REPL}
}}
"""
    proc = coconet_opt(write(tmp_path, "bad.mlir", text))
    assert_clean_error(proc, "bad.mlir:8:15: error: use of undefined value '%y'")


def test_broken_pipe_is_quiet():
    """`coconet-opt ... | head -1`: when the reader goes away, stop silently."""
    script = (
        "from coconet_ir.tools.errors import run_guarded\n"
        "def main():\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "run_guarded('coconet-opt', main)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert proc.stderr == ""
