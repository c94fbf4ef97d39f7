"""Helpers the unit tests share: the examples, equivalence after a pipeline on
2, 4 and 8 ranks, finding ops and functions, and checking how the command-line
tools fail. Tests import them as `from helpers import ...` (tests/unit is on
`sys.path`, as for `strategies`)."""

from __future__ import annotations

import atexit
import fcntl
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

import coconet_ir as cc

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: examples/, docs/, benchmarks/."""

EXAMPLES_DIR = ROOT / "examples"

EXAMPLES = (
    "sgd",
    "adam",
    "lamb",
    "adamw_clip",
    "megatron",
    "megatron_norm",
    "pipeline",
    "sequence_parallel",
    "matmul_reduce_scatter",
    "dlrm_embedding",
    "gemv_allreduce",
    "moe_gemm_a2a",
    "sequence_parallel_mlp",
    "sequence_parallel_norm",
    "sequence_parallel_rmsnorm",
)
"""Every `examples/NAME.mlir` (test_examples checks the list is whole), in
the order the suites run them."""


def load_example(name: str) -> ModuleType:
    """Import `examples/NAME.py` (its TEST and MODEL sizes, its `build`) from
    its path."""
    spec = importlib.util.spec_from_file_location(
        f"coconet_example_{name}", EXAMPLES_DIR / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # dataclasses look their module up
    spec.loader.exec_module(example)
    return example


# ---------------------------------------------------------------------------
# Examples and equivalence
# ---------------------------------------------------------------------------


def example(name: str) -> ModuleOp:
    """The parsed `examples/NAME.mlir`: a copy of its module, parsed once per
    process (xDSL's parser takes ~1 ms a line; a copy keeps the locations,
    names and attributes, and the caller may change it)."""
    return parsed_example(name).clone()


@functools.cache
def parsed_example(name: str) -> ModuleOp:
    """`examples/NAME.mlir` parsed; not to be changed (`example` copies it)."""
    return cc.parse_file(str(EXAMPLES_DIR / f"{name}.mlir"))


def assert_equivalent(name: str, pipeline: str) -> ModuleOp:
    """Run `pipeline` on the example `name`, check the result is equivalent to
    the example on 2, 4 and 8 ranks, and return it."""
    original = example(name)
    rewritten = cc.Pipeline(pipeline)(original)
    for world in (2, 4, 8):
        verdict = cc.equivalent(original, rewritten, world, seed=world)
        assert verdict, f"{name} after {pipeline} on {world} ranks"
    return rewritten


def T(spec: str, layout: str = "replicated") -> str:
    """`!coco.tensor<SPEC, LAYOUT>`, for writing test programs."""
    return f"!coco.tensor<{spec}, {layout}>"


def mlir_opt() -> str | None:
    """Real MLIR 22's mlir-opt (as tests/filecheck/lit.cfg.py finds it), or
    None where it is not installed."""
    found = shutil.which("mlir-opt-22") or shutil.which("mlir-opt")
    default = Path("/usr/lib/llvm-22/bin/mlir-opt")
    return found or (str(default) if default.exists() else None)


def for_every_arch(command: list[str], arches: tuple[str, ...]) -> list[str]:
    """An nvcc command (`toolchain.nvcc_command`, `-arch=sm_XX`) that compiles
    for each of `arches` in one call (`-gencode` per arch): the host code,
    most of a compile, is compiled once, and ptxas reports every kernel per
    arch ("Compiling entry function 'K' for 'sm_XX'")."""
    gencode = [f"-gencode=arch=compute_{a[3:]},code=sm_{a[3:]}" for a in arches]
    arch = [i for i, flag in enumerate(command) if flag.startswith("-arch=")]
    assert len(arch) == 1, command
    return [*command[: arch[0]], *gencode, *command[arch[0] + 1 :]]


def unit_namespace(name: str) -> str:
    """The namespace `one_translation_unit` puts the source `name` in."""
    return "unit_" + re.sub(r"\W", "_", name)


def one_translation_unit(sources: dict[str, str]) -> str:
    """Emitted `.cu` sources as one translation unit, for the tests that only
    compile them: each source in a namespace of its own (`unit_<name>`), its
    `extern "C"` dropped (a C name cannot repeat; the kernels and entries get
    C++ names, which ptxas reports mangled: `_ZN...`), `coco_runtime.h`
    included once at the top. nvcc then parses the CUDA, NCCL and cuBLAS
    headers and compiles the host code once for all of them: most of a
    compile. Sources printed with a `main` cannot be joined."""
    include = '#include "coco_runtime.h"'
    parts = [include]
    for name, text in sources.items():
        assert "COCO_STANDALONE_MAIN" not in text, f"{name} has a main"
        body = text.replace(include + "\n", "").replace('extern "C" ', "")
        space = unit_namespace(name)
        parts.append(f"namespace {space} {{\n{body}\n}}  // namespace {space}")
    return "\n".join(parts) + "\n"


def one_unit_command(sources: dict[str, str], directory: Path) -> list[str]:
    """The nvcc command (`toolchain.nvcc_command`, sm_90) that compiles the
    sources joined into one translation unit (`one_translation_unit`),
    written to `directory`/all.cu."""
    from coconet_ir.backend.cuda.toolchain import nvcc_command

    source = directory / "all.cu"
    source.write_text(one_translation_unit(sources))
    return nvcc_command(source, "sm_90", directory / "all.o")


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[], str]
) -> str:
    """`compute()` (text: a compiler's report), computed once per test run:
    under pytest-xdist a module's tests run on several workers, each of which
    would compute a module-scoped fixture again; here the first worker to get
    here computes it, under a lock, and the others read what it wrote (the
    workers share their base temporary folder's parent, and the run's id)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return compute()
    folder = tmp_path_factory.getbasetemp().parent / f"once-{run}"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.txt"
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            path.write_text(compute())
        return path.read_text()


def device_only(command: list[str]) -> list[str]:
    """An nvcc compile command (`-c ... -o X.o`) made to compile the device
    code only (`-fatbin ... -o X.fatbin`: the front end, cicc and ptxas, for
    every arch; no host compiler), which is all a test of ptxas's report
    needs and half the time of a whole compile. The front end still checks
    the host code (its errors and, with `-Werror all-warnings`, warnings
    fail); the host compiler builds it in test_gpu_backend's libraries."""
    command = list(command)
    command[command.index("-c")] = "-fatbin"
    out = command.index("-o") + 1
    command[out] = str(Path(command[out]).with_suffix(".fatbin"))
    return command


PTXAS_KERNEL = re.compile(
    r"Compiling entry function '(?P<kernel>\w+)' for '(?P<arch>sm_\d+)'.*?"
    r"(?P<spills>\d+) bytes spill stores.*?Used (?P<registers>\d+) registers",
    re.DOTALL,
)
"""One kernel of ptxas's `-v` report: its name, arch, spill stores and
registers."""


def of_source(kernel: str, name: str) -> bool:
    """Whether the (mangled) `kernel` is in `one_translation_unit`'s namespace
    of the source `name`."""
    space = unit_namespace(name)
    return f"N{len(space)}{space}" in kernel


# ---------------------------------------------------------------------------
# Finding ops and functions
# ---------------------------------------------------------------------------


def the_function(module: ModuleOp) -> FuncOp:
    """The one function of `module`."""
    (func,) = (op for op in module.ops if isinstance(op, FuncOp))
    return func


def stage(module: ModuleOp, name: str) -> FuncOp:
    """The function (pipeline stage) `@name` of `module`."""
    return next(
        op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == name
    )


def ops_of(op: Operation, kind: type) -> list:
    """Every op of type `kind` in `op`, nested ones too."""
    return [inner for inner in op.walk() if isinstance(inner, kind)]


# ---------------------------------------------------------------------------
# Command-line tools
# ---------------------------------------------------------------------------


def write(tmp_path: Path, name: str, contents: str | bytes | None) -> Path:
    """`tmp_path / name` holding `contents` (not created when None)."""
    path = tmp_path / name
    if isinstance(contents, str):
        path.write_text(contents)
    elif contents is not None:
        path.write_bytes(contents)
    return path


FORKSERVER = ROOT / "tests" / "filecheck" / "forkserver.py"
_forkserver: str | None = None


def tool_command(tool: str) -> list[str]:
    """The command that runs `tool` (`coconet-opt`, `coconet-run`) as the
    installed script does: its `main` with the caller's arguments, standard
    streams, working directory and environment, and its exit status. Through
    the FileCheck suites' fork server (tests/filecheck/forkserver.py), started
    once per test process, so that a call is a fork, not the imports (most of
    a call's cost); `python -m` where COCONET_LIT_FORKSERVER=0."""
    global _forkserver
    module = "coconet_ir.tools." + tool.replace("-", "_")
    if os.environ.get("COCONET_LIT_FORKSERVER") == "0":
        return [sys.executable, "-m", module]
    if _forkserver is None:
        directory = tempfile.mkdtemp(prefix="coconet-pytest-")
        path = os.path.join(directory, "socket")
        server = subprocess.Popen(
            [sys.executable, str(FORKSERVER), "serve", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert server.stdout is not None
        assert server.stdout.readline().strip() == b"ready"

        def stop() -> None:
            server.terminate()
            server.wait()
            shutil.rmtree(directory, ignore_errors=True)

        atexit.register(stop)
        _forkserver = path
    return [sys.executable, "-S", str(FORKSERVER), _forkserver, tool]


def assert_clean_error(proc: subprocess.CompletedProcess, message: str, code: int = 1):
    """Exit `code`, `message` in one diagnostic on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert message in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr


def pipeline_of(stages: int) -> str:
    """Stage 0: Megatron's row-parallel layer, sent on; each middle stage:
    receive, GELU, + bias, send on; the last: receive, GELU, matmul."""
    t = "!coco.tensor<32x64xf32, replicated>"
    bias = "!coco.tensor<64xf32, replicated>"
    x, w = "!coco.tensor<32x64xf32, sliced<1>>", "!coco.tensor<64x64xf32, sliced<0>>"
    funcs = [
        f"""func.func @stage0(%x: {x}, %w: {w}, %b: {bias}) {{
  %y = coco.matmul %x, %w : ({x}, {w}) -> !coco.tensor<32x64xf32, local>
  %s = coco.all_reduce %y reduction = sum : !coco.tensor<32x64xf32, local> -> {t}
  %o = coco.add %s, %b : ({t}, {bias}) -> {t}
  coco.send %o to @stage1 channel = 0 : {t}
  func.return
}}"""
    ]
    for k in range(1, stages - 1):
        funcs.append(
            f"""func.func @stage{k}(%b: {bias}) {{
  %h = coco.recv from @stage{k - 1} channel = {k - 1} : {t}
  %a = coco.gelu %h : ({t}) -> {t}
  %o = coco.add %a, %b : ({t}, {bias}) -> {t}
  coco.send %o to @stage{k + 1} channel = {k} : {t}
  func.return
}}"""
        )
    last = stages - 1
    funcs.append(
        f"""func.func @stage{last}(%w: !coco.tensor<64x64xf32, replicated>) -> {t} {{
  %h = coco.recv from @stage{last - 1} channel = {last - 1} : {t}
  %a = coco.gelu %h : ({t}) -> {t}
  %m = coco.matmul %a, %w : ({t}, !coco.tensor<64x64xf32, replicated>) -> {t}
  func.return %m : {t}
}}"""
    )
    return "\n".join(funcs)
