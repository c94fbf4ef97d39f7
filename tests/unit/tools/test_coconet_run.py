"""coconet-run as users run it: a subprocess, its exit code, stdout and stderr.

Covers the summary, `--save` (keys and values), `--compare` (equivalent,
not equivalent, also only on signed inputs, bad usage or input) on 2, 4 and 8
ranks, the world size from the module, and the clean-error guarantee (no
traceback) for every bad input.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_clean_error, tool_command, write

WORLDS = (2, 4, 8)

T = "!coco.tensor<16x4xf32, {}>"
LOCAL, REPL, SLICED = T.format("local"), T.format("replicated"), T.format("sliced<0>")

ALL_REDUCE_ADD = f"""
func.func @f(%g: {LOCAL}, %b: {REPL}) -> {REPL} {{
  %s = coco.all_reduce %g reduction = sum : {LOCAL} -> {REPL}
  %r = coco.add %s, %b : ({REPL}, {REPL}) -> {REPL}
  func.return %r : {REPL}
}}
"""

SPLIT_ADD = f"""
func.func @f(%g: {LOCAL}, %b: {REPL}) -> {REPL} {{
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : {LOCAL} -> {SLICED}
  %s = coco.all_gather %rs : {SLICED} -> {REPL}
  %r = coco.add %s, %b : ({REPL}, {REPL}) -> {REPL}
  func.return %r : {REPL}
}}
"""

ALL_REDUCE_SUB = ALL_REDUCE_ADD.replace("coco.add", "coco.sub")

SCALAR = "!coco.tensor<f32, replicated>"

SGD = f"""
func.func @sgd(%g: {LOCAL}, %w: {REPL}, %lr: {SCALAR}) {{
  %sum = coco.all_reduce %g reduction = sum : {LOCAL} -> {REPL}
  %step = coco.mul %lr, %sum : ({SCALAR}, {REPL}) -> {REPL}
  %w1 = coco.sub %w, %step : ({REPL}, {REPL}) -> {REPL}
  coco.update %w, %w1 : {REPL}
  func.return
}}
"""

SGD_ABS = SGD.replace(
    "%step = coco.mul %lr, %sum",
    f"%mag = coco.abs %sum : ({REPL}) -> {REPL}\n  %step = coco.mul %lr, %mag",
)
"""A wrong rewrite of SGD that agrees with it on non-negative inputs only."""

STEP = f"""
func.func @step(%g: {LOCAL}, %w: {REPL}) -> ({SLICED}, {LOCAL}) {{
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : {LOCAL} -> {SLICED}
  %s = coco.all_gather %rs : {SLICED} -> {REPL}
  %w1 = coco.sub %w, %s : ({REPL}, {REPL}) -> {REPL}
  coco.update %w, %w1 : {REPL}
  %n = coco.neg %g : ({LOCAL}) -> {LOCAL}
  func.return %rs, %n : {SLICED}, {LOCAL}
}}
"""

VERIFY_ERROR = f"""
func.func @f(%g: {LOCAL}) -> {LOCAL} {{
  %s = coco.all_reduce %g reduction = sum : {LOCAL} -> {LOCAL}
  func.return %s : {LOCAL}
}}
"""

BAD_INPUTS: dict[str, tuple[bytes | None, str]] = {
    # kind: (file contents, None for a missing file; expected message part)
    "syntax": (b"func.func @f( {\n", "bad.mlir:1:15: error: Expected argument"),
    "verifier": (VERIFY_ERROR.encode(), "bad.mlir:3:3: error: 'coco.all_reduce'"),
    "unknown-op": (
        b"func.func @f() {\n  coco.frobnicate\n}\n",
        "coco.frobnicate is not registered",
    ),
    "garbage": (bytes(range(256)) * 4, "bad.mlir: error: input is not UTF-8"),
    "truncated": (ALL_REDUCE_ADD.encode()[:150], "bad.mlir:3:"),
    "empty": (b"", "bad.mlir: error: empty input"),
    "comments-only": (b"// nothing here\n", "bad.mlir: error: empty input"),
    "missing": (None, "bad.mlir: error: cannot read: No such file"),
}


def coconet_run(*args: str | Path, stdin: str = "") -> subprocess.CompletedProcess:
    """Run the tool as an installed user would (`tool_command`)."""
    return subprocess.run(
        [*tool_command("coconet-run"), *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


# ---------------------------------------------------------------------------
# Running one program
# ---------------------------------------------------------------------------


def test_summary_lists_every_output(tmp_path: Path):
    proc = coconet_run(write(tmp_path, "step.mlir", STEP), "--world", "4")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("3 outputs on 4 ranks (seed 0, backend numpy)")
    keys = sorted(line.split()[0] for line in lines[1:])
    assert keys == ["step.arg1", "step.result0", "step.result1"]
    by_key = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert by_key["step.result0"][:2] == ["16x4xf32", "sliced<0>"]
    assert by_key["step.result1"][:2] == ["16x4xf32", "local"]
    assert by_key["step.arg1"][:2] == ["16x4xf32", "replicated"]
    assert [f.split("=")[0] for f in by_key["step.arg1"][2:]] == [
        "sum",
        "min",
        "max",
        "hash",
    ]


def test_summary_is_deterministic_and_follows_the_seed(tmp_path: Path):
    path = write(tmp_path, "step.mlir", STEP)
    first = coconet_run(path, "--world", "2", "--seed", "3").stdout
    again = coconet_run(path, "--world", "2", "--seed", "3").stdout
    other = coconet_run(path, "--world", "2", "--seed", "4").stdout
    assert first == again
    assert first != other


@pytest.mark.parametrize("world", WORLDS)
def test_save_writes_outputs_and_inputs(tmp_path: Path, world: int):
    out = tmp_path / "out.npz"
    proc = coconet_run(
        write(tmp_path, "step.mlir", STEP), "--world", str(world), "--save", out
    )
    assert proc.returncode == 0, proc.stderr
    assert f"saved 5 arrays to {out}" in proc.stdout
    saved = np.load(out)
    assert sorted(saved.files) == [
        "input:step.arg0",
        "input:step.arg1",
        "step.arg1",
        "step.result0",
        "step.result1",
    ]
    g, w = saved["input:step.arg0"], saved["input:step.arg1"]
    assert g.shape == (world, 16, 4) and w.shape == (16, 4)
    total = g.sum(axis=0)
    np.testing.assert_allclose(saved["step.result0"], total, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(saved["step.arg1"], w - total, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(saved["step.result1"], -g)


def test_save_uses_the_exact_file_name(tmp_path: Path):
    out = tmp_path / "result.data"
    proc = coconet_run(
        write(tmp_path, "p.mlir", ALL_REDUCE_ADD), "--world", "2", "--save", out
    )
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and not (tmp_path / "result.data.npz").exists()
    assert "f.result0" in np.load(out).files


def test_program_from_stdin():
    proc = coconet_run("-", "--world", "2", stdin=ALL_REDUCE_ADD)
    assert proc.returncode == 0, proc.stderr
    assert "f.result0 16x4xf32 replicated" in proc.stdout


def test_pass_pipeline_runs_before_interpreting(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    plain = coconet_run(path, "--world", "4")
    piped = coconet_run(path, "--world", "4", "-p", "canonicalize,cse")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == plain.stdout


# ---------------------------------------------------------------------------
# The world size
# ---------------------------------------------------------------------------


def with_world_size(program: str, world: int) -> str:
    body = program.strip()
    return f"builtin.module attributes {{coco.world_size = {world}}} {{\n{body}\n}}\n"


def test_world_from_the_module(tmp_path: Path):
    proc = coconet_run(write(tmp_path, "p.mlir", with_world_size(ALL_REDUCE_ADD, 4)))
    assert proc.returncode == 0, proc.stderr
    assert "on 4 ranks" in proc.stdout


def test_world_flag_must_agree_with_the_module(tmp_path: Path):
    path = write(tmp_path, "p.mlir", with_world_size(ALL_REDUCE_ADD, 4))
    assert coconet_run(path, "--world", "4").returncode == 0
    proc = coconet_run(path, "--world", "2")
    assert_clean_error(proc, "--world 2 disagrees with the module's", code=2)


def test_world_is_required(tmp_path: Path):
    proc = coconet_run(write(tmp_path, "p.mlir", ALL_REDUCE_ADD))
    assert_clean_error(proc, "the world size is unknown", code=2)


@pytest.mark.parametrize("world", ["0", "-3"])
def test_world_must_be_positive(tmp_path: Path, world: str):
    proc = coconet_run(write(tmp_path, "p.mlir", ALL_REDUCE_ADD), "--world", world)
    assert_clean_error(proc, "--world must be at least 1", code=2)


def test_world_that_does_not_divide_a_sliced_dim(tmp_path: Path):
    proc = coconet_run(write(tmp_path, "p.mlir", SPLIT_ADD), "--world", "3")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "divisible" in proc.stderr or "divide" in proc.stderr


# ---------------------------------------------------------------------------
# Bad input and bad usage
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_running_bad_input_exits_1(tmp_path: Path, kind: str):
    contents, message = BAD_INPUTS[kind]
    proc = coconet_run(write(tmp_path, "bad.mlir", contents), "--world", "2")
    assert_clean_error(proc, message, code=1)


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_comparing_bad_input_exits_2(tmp_path: Path, kind: str):
    contents, message = BAD_INPUTS[kind]
    good = write(tmp_path, "good.mlir", ALL_REDUCE_ADD)
    bad = write(tmp_path, "bad.mlir", contents)
    for first, second in ((good, bad), (bad, good)):
        proc = coconet_run("--compare", first, second, "--world", "2")
        assert_clean_error(proc, message, code=2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-p", "nope"],
            "coconet-run: error: unknown pass 'nope' (`coconet-run --help` lists them)",
        ),
        (["-p", "canonicalise"], "did you mean 'canonicalize'"),
        (["-p", "cse{"], "pass-pipeline:1:5: error: bad pass pipeline"),
        (["-p", "canonicalize{foo=1}"], "pass 'canonicalize' has no option 'foo'"),
        (
            ["-p", "coco-overlap{chunks=abc}"],
            "coconet-run: error: pass 'coco-overlap': option 'chunks' expects an "
            "integer, got 'abc'",
        ),
    ],
)
def test_a_bad_pipeline_exits_as_coconet_opt_does(
    tmp_path: Path, args: list[str], message: str
):
    """Exit 1, as coconet-opt's; 2 with --compare, where 1 means "not equivalent"."""
    path = write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    assert_clean_error(coconet_run(path, "--world", "2", *args), message, code=1)
    proc = coconet_run("--compare", path, path, "--world", "2", *args)
    assert_clean_error(proc, message, code=2)
    opt = subprocess.run(
        [*tool_command("coconet-opt"), str(path), *args], capture_output=True
    )
    assert opt.returncode == 1


def test_help_lists_the_passes_an_unknown_pass_error_points_at():
    proc = coconet_run("--help")
    assert proc.returncode == 0
    listing = proc.stdout.split("passes -p accepts:")[1]
    assert "coco-optimize" in listing and "convert-coco-to-gpu" in listing


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stats"], "--stats only applies to --backend emu"),
        (["--check"], "--check only applies to --backend emu, cuda or triton"),
        (["--seed", "-1"], "--seed must be non-negative"),
        (["--rtol", "0.1"], "--rtol and --atol only apply with --compare"),
    ],
)
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], message: str):
    path = write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    assert_clean_error(coconet_run(path, "--world", "2", *args), message, code=2)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--world", "two", "p.mlir"],
        ["--compare", "p.mlir", "--world", "2"],
        ["p.mlir", "--backend", "cuda"],
        ["p.mlir", "--frobnicate"],
    ],
)
def test_argparse_usage_errors_exit_2(tmp_path: Path, args: list[str]):
    write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    proc = subprocess.run(
        [*tool_command("coconet-run"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "coconet-run: error:" in proc.stderr


def test_file_and_compare_together_is_usage_error(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    proc = coconet_run(path, "--compare", path, path, "--world", "2")
    assert_clean_error(proc, "not both", code=2)


def test_save_with_compare_is_usage_error(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    proc = coconet_run("--compare", path, path, "--world", "2", "--save", "x.npz")
    assert_clean_error(proc, "--save only applies to a run", code=2)


def test_unwritable_save_path(tmp_path: Path):
    path = write(tmp_path, "p.mlir", ALL_REDUCE_ADD)
    out = tmp_path / "no" / "such" / "dir" / "out.npz"
    proc = coconet_run(path, "--world", "2", "--save", out)
    assert_clean_error(
        proc,
        f"coconet-run: error: --save {out}: cannot write: the directory "
        f"{out.parent} does not exist",
        code=2,
    )
    assert proc.stdout == ""


@pytest.mark.parametrize("where", ["missing dir", "a directory"])
def test_unwritable_save_path_is_found_before_running(tmp_path: Path, where: str):
    """A program that would fail to run: the --save path is reported first."""
    path = write(tmp_path, "p.mlir", SPLIT_ADD)  # 16 rows do not divide on 3 ranks
    out = tmp_path / "no" / "out.npz" if where == "missing dir" else tmp_path
    proc = coconet_run(path, "--world", "3", "--save", out)
    assert_clean_error(proc, f"--save {out}: cannot write: ", code=2)
    assert "divisible" not in proc.stderr


def test_a_failed_run_leaves_no_save_file_behind(tmp_path: Path):
    path = write(tmp_path, "p.mlir", SPLIT_ADD)
    new, old = tmp_path / "new.npz", write(tmp_path, "old.npz", "old contents")
    for out in (new, old):
        proc = coconet_run(path, "--world", "3", "--save", out)
        assert proc.returncode == 1, proc.stderr
        assert "divisible" in proc.stderr or "divide" in proc.stderr
    assert not new.exists()
    assert old.read_text() == "old contents"


# ---------------------------------------------------------------------------
# Comparing two programs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("world", WORLDS)
def test_a_program_is_equivalent_to_itself(tmp_path: Path, world: int):
    path = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    proc = coconet_run("--compare", path, path, "--world", str(world))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = f"equivalent: 1 output agrees on {world} ranks (seed 0)"
    assert proc.stdout.strip() == expected


@pytest.mark.parametrize("world", WORLDS)
def test_split_all_reduce_is_equivalent(tmp_path: Path, world: int):
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    b = write(tmp_path, "b.mlir", SPLIT_ADD)
    proc = coconet_run("--compare", a, b, "--world", str(world), "--seed", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"equivalent: 1 output agrees on {world} ranks" in proc.stdout


def matmul_programs(combine: str) -> tuple[str, str]:
    """`[64, 4096] x [4096, 64]` f32, plain and row-parallel (K sliced, local
    partial products, then `combine`)."""
    a, b, c = (
        f"!coco.tensor<{s}xf32, replicated>" for s in ("64x4096", "4096x64", "64x64")
    )
    a_k, b_k = (
        "!coco.tensor<64x4096xf32, sliced<1>>",
        "!coco.tensor<4096x64xf32, sliced<0>>",
    )
    partial = "!coco.tensor<64x64xf32, local>"
    plain = f"""
func.func @f(%a: {a}, %b: {b}) -> {c} {{
  %c = coco.matmul %a, %b : ({a}, {b}) -> {c}
  func.return %c : {c}
}}"""
    split = f"""
func.func @f(%a: {a_k}, %b: {b_k}) -> {c} {{
  %p = coco.matmul %a, %b : ({a_k}, {b_k}) -> {partial}
  %c = coco.all_reduce %p reduction = {combine} : {partial} -> {c}
  func.return %c : {c}
}}"""
    return plain, split


@pytest.mark.parametrize("world", WORLDS)
def test_the_row_parallel_matmul_is_equivalent_and_a_max_is_not(
    tmp_path: Path, world: int
):
    # The sums of K = 4096 terms split across ranks differ in f32 by rounding
    # alone; the comparison runs promoted (f32 as f64), so only the max fails.
    plain, split = matmul_programs("sum")
    a, b = write(tmp_path, "a.mlir", plain), write(tmp_path, "b.mlir", split)
    proc = coconet_run("--compare", a, b, "--world", str(world))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wrong = write(tmp_path, "c.mlir", matmul_programs("max")[1])
    proc = coconet_run("--compare", a, wrong, "--world", str(world))
    assert proc.returncode == 1, proc.stdout + proc.stderr


@pytest.mark.parametrize("world", WORLDS)
def test_a_wrong_rewrite_is_not_equivalent(tmp_path: Path, world: int):
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    b = write(tmp_path, "b.mlir", ALL_REDUCE_SUB)
    proc = coconet_run("--compare", a, b, "--world", str(world))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"not equivalent: f.result0 differs on {world} ranks")
    assert "max abs error" in first and "max rel error" in first


def test_a_rewrite_wrong_only_for_negative_values_is_not_equivalent(tmp_path: Path):
    a = write(tmp_path, "a.mlir", SGD)
    b = write(tmp_path, "b.mlir", SGD_ABS)
    proc = coconet_run("--compare", a, b, "--world", "4")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    first, second = proc.stdout.splitlines()
    assert first.startswith("not equivalent: sgd.arg1 differs on 4 ranks (seed 0)")
    assert second.startswith("  with signed inputs: sgd.arg1: max abs error")


def test_tolerances_decide(tmp_path: Path):
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    b = write(tmp_path, "b.mlir", ALL_REDUCE_SUB)
    loose = coconet_run("--compare", a, b, "--world", "2", "--atol", "1e9")
    assert loose.returncode == 0, loose.stdout + loose.stderr
    bad = coconet_run("--compare", a, b, "--world", "2", "--rtol", "-1")
    assert_clean_error(bad, "--rtol must be non-negative", code=2)


def test_compare_with_stdin(tmp_path: Path):
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    proc = coconet_run("--compare", a, "-", "--world", "4", stdin=SPLIT_ADD)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compare_world_from_modules(tmp_path: Path):
    a = write(tmp_path, "a.mlir", with_world_size(ALL_REDUCE_ADD, 4))
    b = write(tmp_path, "b.mlir", with_world_size(SPLIT_ADD, 4))
    c = write(tmp_path, "c.mlir", with_world_size(SPLIT_ADD, 2))
    assert coconet_run("--compare", a, b).returncode == 0
    proc = coconet_run("--compare", a, c)
    assert_clean_error(proc, "the programs disagree on coco.world_size", code=2)


def test_compare_missing_entry_exits_2(tmp_path: Path):
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    proc = coconet_run("--compare", a, a, "--world", "2", "--entry", "nope")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "nope" in proc.stderr


# ---------------------------------------------------------------------------
# Programs whose signatures differ cannot be compared
# ---------------------------------------------------------------------------

EXTRA_ARGUMENT = ALL_REDUCE_ADD.replace(
    f"%b: {REPL})", f"%b: {REPL}, %c: {REPL})"
).replace("coco.add %s, %b", "coco.add %s, %c")

ROW = "!coco.tensor<4xf32, replicated>"
ROW_ARGUMENT = ALL_REDUCE_ADD.replace(f"%b: {REPL}", f"%b: {ROW}").replace(
    f"({REPL}, {REPL}) -> {REPL}", f"({REPL}, {ROW}) -> {REPL}"
)

TWO_RESULTS = ALL_REDUCE_ADD.replace(
    f") -> {REPL} {{", f") -> ({REPL}, {REPL}) {{"
).replace(f"func.return %r : {REPL}", f"func.return %r, %s : {REPL}, {REPL}")

SIGNATURE_CHANGES: dict[str, tuple[str, str]] = {
    # change: (program b, the reason, with a = ALL_REDUCE_ADD)
    "argument added": (EXTRA_ARGUMENT, f"argument f.arg2 ({REPL}) of b is not in a"),
    "argument shape": (
        ROW_ARGUMENT,
        f"argument f.arg1 is {REPL} in a but {ROW} in b (fed as [16, 4] and [4]",
    ),
    "result added": (TWO_RESULTS, f"result f.result1 ({REPL}) of b is not in a"),
}


@pytest.mark.parametrize("change", SIGNATURE_CHANGES)
@pytest.mark.parametrize("world", WORLDS)
def test_programs_with_other_signatures_cannot_be_compared(
    tmp_path: Path, change: str, world: int
):
    program, reason = SIGNATURE_CHANGES[change]
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    b = write(tmp_path, "b.mlir", program)
    proc = coconet_run("--compare", a, b, "--world", str(world))
    assert_clean_error(
        proc,
        f"coconet-run: error: cannot compare {a} (a) with {b} (b), their "
        f"signatures differ: {reason}",
        code=2,
    )
    assert proc.stdout == ""


def test_an_argument_removed_cannot_be_compared(tmp_path: Path):
    a = write(tmp_path, "a.mlir", EXTRA_ARGUMENT)
    b = write(tmp_path, "b.mlir", ALL_REDUCE_ADD)
    proc = coconet_run("--compare", a, b, "--world", "2")
    assert_clean_error(proc, f"argument f.arg2 ({REPL}) of a is not in b", code=2)


def test_a_result_of_another_shape_is_not_equivalent(tmp_path: Path):
    """The same inputs run both; a result of another shape is another value."""
    narrow = T.format("replicated").replace("16x4", "16")
    reduced = ALL_REDUCE_ADD.replace(f") -> {REPL} {{", f") -> {narrow} {{").replace(
        f"func.return %r : {REPL}",
        f"%n = coco.reduce %r kind = sum dims = [1] : ({REPL}) -> {narrow}\n"
        f"  func.return %n : {narrow}",
    )
    a = write(tmp_path, "a.mlir", ALL_REDUCE_ADD)
    b = write(tmp_path, "b.mlir", reduced)
    proc = coconet_run("--compare", a, b, "--world", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("not equivalent: f.result0 differs on 2 ranks")
    assert "shape [16, 4] in a but [16] in b" in proc.stdout
