"""The real-GPU backend (docs/gpu/running.md): every example's printed `.cu`
(joined in one translation unit, and lamb alone) builds with the harness
(`-include coco_gpu_harness.h`) into shared libraries that link against the
NCCL and cuBLAS wheels and load; the benchmark main of
`-t 'cuda{main=true}'` builds into an executable (sm_80, sm_90) that parses
its options and fails cleanly without a GPU (lamb's library and program
link the same object: the benchmark main's file is the library's plus its
`main`); `gpu_run` imports without cupy
and refuses to run without a GPU. The run on GPUs is skipped where there is
none (here and in CI): nothing in this file was run on a GPU."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    EXAMPLES,
    for_every_arch,
    once_per_run,
    one_translation_unit,
    unit_namespace,
)
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.dialects.func import FuncOp

import coconet_ir as cc
from coconet_ir.analysis.costs import function_costs, message_bytes
from coconet_ir.backend.cuda import runtime_dir
from coconet_ir.backend.cuda.printer import print_cuda
from coconet_ir.backend.cuda.toolchain import (
    link_flags,
    nccl_include_dirs,
    nvcc,
    nvcc_command,
)
from coconet_ir.backend.emu import EntryCall
from coconet_ir.dialects import coco_gpu

ROOT = Path(__file__).resolve().parents[3]
WORLD = 8

needs_toolchain = pytest.mark.skipif(
    nvcc() is None or not nccl_include_dirs(),
    reason="nvcc or the nvidia-nccl-cu13/nvidia-cublas wheels are not installed",
)


def gpus() -> int:
    from coconet_ir.backend.cuda.gpu_run import gpu_count

    return gpu_count()


def lowered(name: str, world: int = WORLD) -> ModuleOp:
    module = cc.parse_file(str(ROOT / "examples" / f"{name}.mlir"))
    return cc.Pipeline(f"coco-optimize,convert-coco-to-gpu{{world={world}}}")(module)


def printed(module: ModuleOp, main: bool = False) -> str:
    out = StringIO()
    print_cuda(module, out, main=main)
    return out.getvalue()


def run(command: list[str], cwd: Path, timeout: float = 900) -> str:
    proc = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{' '.join(command)}:\n{proc.stdout}{proc.stderr}"
    return proc.stdout + proc.stderr


def load_harness(library: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library))
    lib.coco_gpu_create.restype = ctypes.c_void_p
    lib.coco_gpu_create.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
    ]
    lib.coco_gpu_create_error.restype = ctypes.c_char_p
    return lib


# ----------------------------------------------------------- static, no nvcc


def test_bytes_of_the_entries_come_from_costs():
    """The conversion stamps each communicating function with the nccl-tests
    size and the bus bytes of coconet_ir.analysis.costs, computed on the coco
    function; the benchmark table prints them."""
    module = cc.parse_file(str(ROOT / "examples" / "megatron.mlir"))
    optimized = cc.Pipeline("coco-optimize")(module)
    expected = {
        f.sym_name.data: function_costs(f, WORLD)
        for f in optimized.ops
        if isinstance(f, FuncOp)
    }
    device = cc.Pipeline(f"convert-coco-to-gpu{{world={WORLD}}}")(optimized)
    for f in device.ops:
        if not isinstance(f, FuncOp):
            continue
        costs = expected[f.sym_name.data]
        attr = f.attributes[coco_gpu.BYTES_ATTR]
        assert tuple(attr.get_values()) == (costs.message_bytes, costs.bytes_sent)  # type: ignore[attr-defined]
        assert costs.bytes_sent > 0
        text = printed(device, main=True)
        assert f"{costs.message_bytes}ull, {costs.bytes_sent}ull}}" in text


def test_message_bytes_are_nccl_tests_sizes():
    module = cc.parse_file(str(ROOT / "examples" / "sgd.mlir"))
    (f,) = [f for f in module.ops if isinstance(f, FuncOp)]
    (all_reduce,) = [op for op in f.walk() if op.name == "coco.all_reduce"]
    size = message_bytes(all_reduce, 4)
    assert size > 0
    # nccl-tests' all-reduce bus factor: 2(N-1)/N
    from coconet_ir.analysis.costs import bytes_sent

    assert bytes_sent(all_reduce, 4) == size * 2 * 3 // 4


def test_main_prints_a_table_and_main_under_nvcc_only():
    """The benchmark header brings the GPU harness: the printed file needs no
    macro to ask for it."""
    text = printed(lowered("megatron"), main=True)
    assert "COCO_GPU_HARNESS" not in text
    assert text.index('#include "coco_runtime.h"') < text.index("#ifdef __CUDACC__")
    section = text[text.index("#ifdef __CUDACC__") :]
    assert '#include "coco_gpu_bench.h"' in section
    assert "int main(int argc, char **argv) {" in section
    assert '{"megatron", 0, 5, coco_bench_args_megatron' in section
    assert "int main" not in printed(lowered("megatron"))


@pytest.mark.parametrize("pipeline", ["", "coco-optimize,"])
def test_main_fills_embedding_indices_inside_the_tables(pipeline: str):
    """An embedding's index argument is filled with rows of its tables (the
    issue-26 crash: the pattern's negative values were out of range); the
    tables and the result keep the float pattern (bound 0), optimized into a
    fused operator or not."""
    module = cc.parse_file(str(ROOT / "examples" / "dlrm_embedding.mlir"))
    rows = 64  # dlrm_embedding.mlir: tables 16x64x16
    device = cc.Pipeline(f"{pipeline}convert-coco-to-gpu{{world=4}}")(module)
    text = printed(device, main=True)
    table = next(line for line in text.splitlines() if "coco_bench_args_dlrm" in line)
    assert "{COCO_BENCH_F32, 4096ull, 0ull}" in table  # this rank's 4 of 16 tables
    assert f"{{COCO_BENCH_I32, 256ull, {rows}ull}}" in table


RUNTIME_INCLUDES = {
    "coco_emu_api.h": set(),
    "coco_emu.h": {"coco_emu_api.h"},
    "coco_runtime.h": {"coco_emu_api.h"},
    "coco_emu_harness.h": {"coco_emu.h", "coco_runtime.h"},
    "coco_gpu_harness.h": {"coco_runtime.h"},
    "coco_gpu_bench.h": {"coco_gpu_harness.h"},
    "coco_tile_mma.h": set(),
}


def test_runtime_headers_include_what_they_use_as_a_dag():
    """Each runtime header includes the runtime headers it uses, at its top
    (none is included at the end of another), and the include graph is the
    layering coco_runtime.h's first comment draws: no circle."""
    found: dict[str, set[str]] = {}
    for header in sorted(runtime_dir().glob("*.h")):
        lines = header.read_text().splitlines()
        includes = [
            (n, line.split('"')[1])
            for n, line in enumerate(lines)
            if line.startswith('#include "')
        ]
        found[header.name] = {name for _, name in includes}
        code = [
            n
            for n, line in enumerate(lines)
            if line and not line.startswith(("//", "#"))
        ]
        assert all(n < code[0] for n, _ in includes), header.name
    assert found == RUNTIME_INCLUDES
    header = (runtime_dir() / "coco_runtime.h").read_text()
    assert all(name in header.split("#pragma once")[0] for name in found)


def test_each_harness_builds_alone_with_gxx_and_refuses_the_other_compiler(
    tmp_path: Path,
):
    """coco_emu_harness.h compiles on its own (it includes the emulator and
    coco_runtime.h): the harness object every emulated build links is built
    from a file that includes it alone (`harness_object`, cached);
    coco_gpu_harness.h under g++ is an #error naming the emulation's."""
    from coconet_ir.backend.emu.build import compiler, emulation_flags, harness_object

    def syntax(header: str) -> subprocess.CompletedProcess[str]:
        source = tmp_path / "only.cpp"
        source.write_text(f'#include "{header}"\n')
        command = [compiler(), "-std=c++20", "-fsyntax-only", f"-I{runtime_dir()}"]
        return subprocess.run(
            [*command, str(source)], capture_output=True, text=True, timeout=120
        )

    stub = harness_object([compiler(), *emulation_flags()]).with_suffix(".cc")
    assert stub.read_text() == f'#include "{runtime_dir() / "coco_emu_harness.h"}"\n'
    refused = syntax("coco_gpu_harness.h")
    assert refused.returncode != 0
    assert "the emulation's is coco_emu_harness.h" in refused.stderr


def test_nvcc_command_for_the_harness_and_the_benchmark(tmp_path):
    shared = nvcc_command("x.cu", "sm_90", tmp_path / "x.so", shared=True, harness=True)
    included = shared[shared.index("-include") + 1]
    assert included == str(runtime_dir() / "coco_gpu_harness.h")
    assert "-shared" in shared
    assert "-include" not in nvcc_command("x.cu", "sm_90", tmp_path / "x.o")
    assert any(flag.startswith("-l:libnccl") for flag in shared)
    program = nvcc_command(
        "x.cu", "sm_80", tmp_path / "x", executable=True, harness=True
    )
    assert "-c" not in program and "-shared" not in program
    assert program[-len(link_flags()) :] == link_flags()


def test_toolchain_prints_the_command():
    out = subprocess.run(
        [sys.executable, "-m", "coconet_ir.backend.cuda.toolchain", "megatron.cu"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "coco_gpu_harness.h" in out and "megatron.cu -o megatron" in out
    flags = subprocess.run(
        [sys.executable, "-m", "coconet_ir.backend.cuda.toolchain", "--nvcc-flags"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert flags.startswith("-arch=sm_90") and "nvcc" not in flags.split()[0]


# -------------------------------------------------------------- gpu_run, no GPU


def test_gpu_run_imports_without_cupy():
    code = (
        "import sys; sys.modules['cupy'] = None\n"
        "import coconet_ir.backend.cuda.gpu_run as g\n"
        "loaded = sys.modules.get('cupy') is not None\n"
        "print(g.run_gpu.__name__, loaded)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["run_gpu", "False"]


@pytest.mark.skipif(
    gpus() > 0, reason="a GPU is present: the no-GPU error cannot happen"
)
def test_running_without_a_gpu_is_a_clear_error():
    from coconet_ir.backend.cuda.gpu_run import GpuRunError, run_gpu

    call = EntryCall("coco_sgd", [[np.zeros(4, np.float32)], [np.zeros(4, np.float32)]])
    with pytest.raises(GpuRunError, match=r"no GPU: "):
        run_gpu("/nonexistent/library.so", 2, [call])


def test_calls_are_checked_before_the_gpu():
    from coconet_ir.backend.cuda.gpu_run import run_gpu
    from coconet_ir.diagnostics import CocoError

    call = EntryCall("coco_sgd", [[np.zeros(4, np.float32)]])
    with pytest.raises(CocoError, match="arguments for 1 ranks, world has 2"):
        run_gpu("/nonexistent/library.so", 2, [call])


# --------------------------------------------------------------------- nvcc


ALONE = "lamb"
"""The example built alone (its library, and its benchmark program)."""


@pytest.fixture(scope="module")
def alone_object(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ALONE` printed with `-t 'cuda{main=true}'` at world 8 (the library's
    file plus its benchmark `main`), compiled once per run with the harness
    (warnings as errors, `-fPIC`; sm_80 and sm_90 in one call,
    `for_every_arch`) into an object that both its shared library and its
    program link."""

    def build() -> str:
        folder = tmp_path_factory.mktemp(ALONE)
        source = folder / f"{ALONE}.cu"
        source.write_text(printed(lowered(ALONE), main=True))
        command = nvcc_command(source, "sm_90", folder / f"{ALONE}.o", harness=True)
        command[command.index("-c") : command.index("-c")] = ["-Xcompiler", "-fPIC"]
        # As a distribution's g++ builds it (Ubuntu 24.04: _FORTIFY_SOURCE, -O2),
        # with truncation warnings at their strictest: -Werror must not depend on
        # the host compiler (issue 26: the runtime's snprintf failed g++ 13.3).
        command += ["-Xcompiler", "-O2,-D_FORTIFY_SOURCE=2,-Wformat-truncation=2"]
        run(for_every_arch(command, ("sm_80", "sm_90")), folder)
        return str(folder / f"{ALONE}.o")

    return Path(once_per_run(tmp_path_factory, f"gpu_backend_{ALONE}", build))


def link(objects: list[Path | str], out: Path, *, shared: bool) -> None:
    """nvcc links `objects` into a shared library or a program, against NCCL
    and cuBLAS."""
    arch = ["-arch=sm_90", "-shared"] if shared else []
    command = [str(nvcc()), *arch, *map(str, objects), "-o", str(out)]
    run([*command, *link_flags()], out.parent)


@needs_toolchain
def test_harness_and_every_example_build_shared_libraries_that_link(
    tmp_path: Path, alone_object: Path
):
    """Every example (coco-optimize'd, world 8) printed, compiled with the
    harness (force-included, sm_90, warnings as errors) and linked into a
    shared library against NCCL and cuBLAS, which loads (every symbol
    resolves) and exports the harness; coco_gpu_create fails with a message
    where there is no GPU. Two libraries: every example joined in one
    translation unit (`one_translation_unit`, most of a compile is the
    headers: their functions get C++ names in a namespace each), and
    `ALONE` alone (`alone_object`), whose library exports its entry under its
    C name."""
    modules = {name: lowered(name) for name in EXAMPLES}
    sources = {name: printed(module) for name, module in modules.items()}
    (tmp_path / "all.cu").write_text(
        one_translation_unit(sources)
        + 'extern "C" int coco_world_size(void) { return 1; }\n'
    )
    command = nvcc_command("all.cu", "sm_90", "all.o", harness=True)
    command[command.index("-c") : command.index("-c")] = ["-Xcompiler", "-fPIC"]
    run(command, tmp_path)
    objects = {"all": tmp_path / "all.o", ALONE: alone_object}
    for name, obj in objects.items():
        library = tmp_path / f"lib{name}.so"
        link([obj], library, shared=True)
        lib = load_harness(library)
        for symbol in (
            "coco_gpu_context",
            "coco_gpu_bind",
            "coco_gpu_synchronize",
            "coco_gpu_timer_start",
            "coco_gpu_timer_stop",
            "coco_gpu_destroy",
            "coco_last_error",
        ):
            assert hasattr(lib, symbol), (name, symbol)
        if gpus() == 0:
            assert not lib.coco_gpu_create(1, 1, None, 0, 0)
            assert lib.coco_gpu_create_error().startswith(b"coco_gpu_harness.h:")
        assert not lib.coco_gpu_create(0, 1, None, 0, 0)
        assert b"1..16 ranks per stage" in lib.coco_gpu_create_error()
    entries = {
        (name, f.sym_name.data)
        for name, module in modules.items()
        for f in module.ops
        if isinstance(f, FuncOp)
    }
    alone = ctypes.CDLL(str(tmp_path / f"lib{ALONE}.so"))
    for name, entry in entries:
        if name == ALONE:
            assert hasattr(alone, f"coco_{entry}")
    defined = run(["nm", "-DC", "--defined-only", "liball.so"], tmp_path)
    for name, entry in entries:
        assert f"{unit_namespace(name)}::coco_{entry}(" in defined, (name, entry)


@needs_toolchain
def test_benchmark_main_builds_an_executable(tmp_path: Path, alone_object: Path):
    """lamb with `-t 'cuda{main=true}'` at world 8 (`alone_object`: warnings
    as errors, sm_80 and sm_90, a distribution's host flags) links into a
    program; it prints its usage, and refuses a world it was not converted
    for, or too few GPUs (no GPU run here)."""
    program = tmp_path / ALONE
    link([alone_object], program, shared=False)
    usage = run([str(program), "--help"], tmp_path, timeout=60)
    assert "--iters I" in usage and "(8)" in usage
    wrong = subprocess.run(
        [str(program), "--world", "4"], capture_output=True, text=True
    )
    assert wrong.returncode == 1
    assert "converted for 8 ranks per stage" in wrong.stderr
    if gpus() < WORLD:
        few = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
        assert few.returncode == 1 and "need 8 GPUs" in few.stderr


# ------------------------------------------------------------- on a real GPU


def _module_int(module: ModuleOp, name: str) -> int:
    attr = module.attributes.get(name)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


@needs_toolchain
@pytest.mark.skipif(gpus() < 2, reason="needs 2 GPUs (none here or in CI): not run")
def test_sgd_on_two_gpus_matches_the_interpreter():  # pragma: no cover - no GPU in CI
    from coconet_ir.backend.cuda.gpu_run import compile_gpu, run_gpu
    from coconet_ir.dialects.coco import TensorType
    from coconet_ir.interpreter.inputs import argument_key, draw_inputs, result_key
    from coconet_ir.interpreter.values import DistValue, join, storage_dtype
    from coconet_ir.lowering.bufferize import local_shape

    world = 2
    module = cc.parse_file(str(ROOT / "examples" / "sgd.mlir"))
    device = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(module.clone())
    library = compile_gpu(printed(device))
    expected = cc.interpret(module, world, seed=0)
    inputs = draw_inputs(module, world, 0)
    (f,) = [f for f in module.ops if isinstance(f, FuncOp)]
    args: list[list[np.ndarray]] = [[] for _ in range(world)]
    outputs: dict[str, int] = {}
    types: dict[str, TensorType] = {}
    for position, arg in enumerate(f.body.block.args):
        dist = DistValue.from_global(arg.type, inputs[argument_key(f, position)], world)  # type: ignore[arg-type]
        for r, a in enumerate(dist.ranks()):
            args[r].append(np.array(a, copy=True, order="C"))
        if argument_key(f, position) in expected.outputs:
            outputs[argument_key(f, position)] = position
            types[argument_key(f, position)] = arg.type  # type: ignore[assignment]
    for position, t in enumerate(f.function_type.outputs.data):
        assert isinstance(t, TensorType)
        for r in range(world):
            args[r].append(
                np.zeros(local_shape(t, world), storage_dtype(t.element_type))
            )  # type: ignore[attr-defined]
        outputs[result_key(f, position)] = len(f.body.block.args) + position
        types[result_key(f, position)] = t  # type: ignore[assignment]
    got, report = run_gpu(
        library,
        world,
        [EntryCall(f"coco_{f.sym_name.data}", args, 0, outputs)],
        symmetric_bytes=_module_int(device, "coco_gpu.symmetric_bytes"),
        signal_slots=max(_module_int(device, "coco_gpu.signal_slots"), 1),
        warmup=2,
        iters=5,
    )
    for key, arrays in got.items():
        t = types[key]
        whole = (
            join(np.stack(arrays), t.layout.sliced_dim)
            if t.layout.is_sliced
            else arrays[0]
        )
        np.testing.assert_allclose(whole, np.asarray(expected[key]), rtol=1e-5)
    assert report["timing"]["ms"] > 0
