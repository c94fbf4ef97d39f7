"""`coconet_ir.torch_op`, a compiled program as a PyTorch custom op
(docs/frameworks.md).

Without torch: the module imports (torch blocked in a subprocess), `register`
says to install torch, and the ctypes mirror of `coco_context` has the
header's layout (g++). With torch (not a dependency of the project; these
tests skip with the reason where it is not installed): the op registers with
the schema of the lowered function, its fake kernel gives the per-rank shapes,
its CPU kernel equals the reference interpreter (world 1 in process, world 2
as two processes over gloo, through the interpreter and the emulator),
`opcheck` and `torch.compile` accept it, `enqueue` passes tensors to a host
entry (an emulated library), and the NCCL unique id reaches every rank. The
GPU tests are skipped where there is no GPU: none of them was run on one."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
from itertools import count
from pathlib import Path

import numpy as np
import pytest
from helpers import EXAMPLES_DIR

import coconet_ir as cc
from coconet_ir import torch_op
from coconet_ir.backend.cuda import runtime_dir
from coconet_ir.backend.cuda.toolchain import nccl_include_dirs, nvcc
from coconet_ir.backend.emu.build import compiler
from coconet_ir.interpreter.values import DistValue

NO_TORCH = "PyTorch is not installed (pip install torch; docs/frameworks.md)"
_names = count()


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason=NO_TORCH)


def register(program, **options) -> torch_op.CocoOp:
    """`torch_op.register` under a name no other test of this process used."""
    stem = program if isinstance(program, str) else "f"
    if isinstance(program, str):
        program = EXAMPLES_DIR / f"{program}.mlir"
    return torch_op.register(program, f"coconet_test::{stem}_{next(_names)}", **options)


def rank_outputs(op: torch_op.CocoOp, run: cc.RunResult, rank: int) -> dict:
    """Rank `rank`'s share of the interpreter's outputs, by the op's types."""
    specs = [*op.arguments, *op.results]
    return {
        s.key: DistValue.from_global(s.type, run[s.key], op.world).rank(rank)
        for s in specs
        if s.key in run.outputs
    }


def op_outputs(op: torch_op.CocoOp, tensors, returned) -> dict:
    """The op's outputs after a call: updated arguments, then results."""
    results = [] if returned is None else returned
    results = [results] if not isinstance(results, tuple | list) else list(results)
    found = {
        s.key: torch_op.to_numpy(t, s)
        for s, t in zip(op.arguments, tensors)
        if s.updated
    }
    found.update({s.key: torch_op.to_numpy(t, s) for s, t in zip(op.results, results)})
    return found


# ---------------------------------------------------------------------------
# Without torch
# ---------------------------------------------------------------------------

BLOCKED = """
import sys
sys.modules["torch"] = None  # `import torch` raises ImportError
import coconet_ir.torch_op as torch_op
print(torch_op.DEFAULT_PASSES)
try:
    torch_op.register({path!r})
except ImportError as err:
    print("ImportError:", err)
"""


def test_the_module_imports_without_torch():
    path = str(EXAMPLES_DIR / "sgd.mlir")
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKED.format(path=path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    passes, error = proc.stdout.splitlines()
    assert passes == torch_op.DEFAULT_PASSES
    assert error.startswith("ImportError: coconet_ir.torch_op needs PyTorch")
    assert "pip install torch" in error


LAYOUT = """
#include "coco_runtime.h"
#include <cstddef>
#include <cstdio>
#define FIELD(f) printf(#f " %zu\\n", offsetof(coco_context, f));
int main() {
  FIELDS
  printf("sizeof %zu\\n", sizeof(coco_context));
}
"""


@pytest.mark.skipif(shutil.which(compiler()) is None, reason="no C++ compiler")
def test_the_context_mirror_has_the_layout_of_the_header(tmp_path: Path):
    """ctypes' `coco_context` against the header's, compiled by g++ (the
    emulation's handles are pointers, as CUDA's are)."""
    struct = torch_op.context_struct()
    names = [name for name, *_ in struct._fields_]
    source = tmp_path / "layout.cpp"
    fields = " ".join(f"FIELD({name})" for name in names)
    source.write_text(LAYOUT.replace("FIELDS", fields))
    program = tmp_path / "a.out"
    subprocess.run(
        [compiler(), "-std=c++20", "-pthread", f"-I{runtime_dir()}", str(source)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    printed = subprocess.run([program], capture_output=True, text=True, check=True)
    offsets = dict(line.split() for line in printed.stdout.splitlines())
    assert int(offsets.pop("sizeof")) == ctypes.sizeof(struct)
    assert {k: int(v) for k, v in offsets.items()} == {
        name: getattr(struct, name).offset for name in names
    }


# ---------------------------------------------------------------------------
# Registration and the fake kernel
# ---------------------------------------------------------------------------


def test_the_op_has_the_lowered_functions_schema(torch):
    op = register("adam", world=4)
    assert op.schema == (
        "(Tensor g, Tensor(a1!) w, Tensor(a2!) m, Tensor(a3!) v, Tensor lr, "
        "Tensor b1t, Tensor b2t) -> ()"
    )
    # Without the fused kernels coco-optimize keeps Adam as written (its cost
    # model predicts the split all-reduce slower), so m and v stay whole.
    assert [a.shape for a in op.arguments] == [(1024,)] * 4 + [()] * 3
    # With them, coco-slice-state keeps m and v sliced: each rank a quarter.
    fused = register("adam", world=4, passes="coco-optimize")
    assert [a.shape for a in fused.arguments][2:4] == [(256,), (256,)]
    namespace, name = op.name.split("::")
    assert getattr(getattr(torch.ops, namespace), name).default is not None
    assert "coco_adam" in op.lowered.cuda


@pytest.mark.parametrize(
    ("example", "shapes"),
    [
        # 4x8x64 replicated: every rank holds it whole.
        ("megatron", [(4, 8, 64)]),
        # 16x8x64 sliced<2> on 4 ranks: 64 / 4 = 16 on each.
        ("sequence_parallel", [(16, 8, 16)]),
        ("sgd", []),
    ],
)
def test_the_fake_kernel_gives_per_rank_shapes(torch, example, shapes):
    op = register(example, world=4)
    meta = [torch.empty(a.shape, dtype=a.dtype, device="meta") for a in op.arguments]
    returned = op(*meta)
    results = [] if returned is None else [returned]
    assert [tuple(r.shape) for r in results] == shapes
    assert all(r.device.type == "meta" and r.dtype == torch.float32 for r in results)


def test_bad_calls_and_requests_are_refused(torch):
    op = register("megatron", world=4)
    good = [torch.zeros(a.shape) for a in op.arguments]
    with pytest.raises(cc.CocoError, match=r"x must be torch\.float32 of shape"):
        op(torch.zeros(3), *good[1:])
    with pytest.raises(cc.CocoError, match=r"initialize torch\.distributed"):
        op(*good)
    fused = register("adam", world=4, passes="coco-optimize")
    assert fused.lowered.symmetric_bytes > 0  # fused kernels register too
    with pytest.raises(cc.CocoError, match="form a pipeline"):
        register("pipeline", world=2, entry="stage1")
    with pytest.raises(cc.CocoError, match="cpu must be one of"):
        register("sgd", world=1, cpu="gpu")
    with pytest.raises(cc.CocoError, match="give world=N"):
        register("sgd")


# ---------------------------------------------------------------------------
# The CPU kernel
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["sgd", "adam", "megatron", "sequence_parallel"])
def test_the_cpu_kernel_on_one_rank_is_the_interpreter(torch, example):
    op = register(example, world=1)
    tensors = op.shard(seed=3)
    got = op_outputs(op, tensors, op(*tensors))
    want = rank_outputs(op, cc.interpret(op.module, 1, seed=3), 0)
    assert got.keys() == want.keys() and got
    for key in want:
        assert np.array_equal(got[key], want[key]), key


def elementwise(element: str):
    @cc.function(name="axpy")
    def axpy(
        x: cc.tensor([8, 4], element, cc.sliced(0)),
        w: cc.tensor([8, 4], element, cc.sliced(0)),
    ):
        cc.update(w, w + x * x)
        return x + w

    return axpy


@pytest.mark.parametrize("element", ["f16", "bf16", "f32", "f64", "i32"])
def test_every_dtype_round_trips_bit_for_bit(torch, element):
    op = register(elementwise(element), world=1)
    tensors = op.shard(seed=1)
    assert all(
        t.dtype == getattr(torch, a.element.numpy_name)
        for t, a in zip(tensors, op.arguments)
    )
    got = op_outputs(op, tensors, op(*tensors))
    want = rank_outputs(op, cc.interpret(op.module, 1, seed=1), 0)
    for key in want:
        assert got[key].tobytes() == want[key].tobytes(), key


def test_the_emulator_cpu_kernel_runs_the_lowered_cuda_c(torch):
    op = register("megatron", world=1, cpu="emulator")
    tensors = op.shard(seed=2)
    got = op_outputs(op, tensors, op(*tensors))
    want = rank_outputs(op, cc.interpret(op.module, 1, seed=2), 0)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("example", ["sgd", "megatron"])
def test_opcheck(torch, example):
    op = register(example, world=1)
    verdict = torch.library.opcheck(op.op, tuple(op.shard(seed=4)))
    assert set(verdict.values()) == {"SUCCESS"}, verdict


def test_autograd_is_the_derived_backward(torch):
    """`register` gives a differentiable program the backward coco-grad
    derives (an op of its own): the gradients of Megatron's row-parallel
    layer through the op equal torch's autograd of the same layer."""
    op = register("megatron", world=1)
    assert op.backward is not None and op.backward.name == f"{op.name}_backward"
    x, w, bias, r = (t.double().requires_grad_() for t in op.shard(seed=3))
    arguments = [t.detach().float().requires_grad_() for t in (x, w, bias, r)]
    out = op(*arguments)
    cotangent = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * cotangent).sum().backward()
    ones = [torch.ones_like(t) for t in arguments]
    keep = op(*ones[:3], torch.zeros_like(arguments[3])) != 0  # the dropout mask
    reference = (torch.where(keep, (x @ w + bias) / 0.9, 0.0) + r) * cotangent
    reference.sum().backward()
    for mine, theirs in zip(arguments, (x, w, bias, r)):
        np.testing.assert_allclose(mine.grad, theirs.grad, rtol=1e-5, atol=1e-5)


def test_autograd_registers_where_the_program_has_a_gradient(torch):
    assert register("sgd", world=1).backward is None  # coco.update: none
    with pytest.raises(cc.CocoError, match=r"'coco.update' op coco-grad cannot"):
        register("sgd", world=1, autograd=True)
    assert register("megatron", world=1, autograd=False).backward is None


def test_opcheck_with_gradients(torch):
    op = register("megatron", world=1)
    tensors = tuple(t.requires_grad_() for t in op.shard(seed=4))
    verdict = torch.library.opcheck(op.op, tensors)
    assert set(verdict.values()) == {"SUCCESS"}, verdict


class _Function:
    """A ctypes function's stand-in: settable argtypes/restype, a result."""

    def __init__(self, result):
        self.result, self.argtypes, self.restype = result, None, None

    def __call__(self, *arguments):
        return self.result


def test_check_waits_raises_the_device_watchdogs_report(torch, monkeypatch):
    """`CocoOp.check_waits` (and `close`) ask the library's
    `coco_gpu_check_waits` and raise its text (the device side is compiled
    by the nvcc tests; without a GPU the library and device are stand-ins)."""
    import contextlib
    import threading
    from types import SimpleNamespace

    from coconet_ir.backend.cuda.gpu_run import GpuRunError

    report = b"device watchdog: 1 signal wait(s) gave up after 20 s on rank 1"
    rank = object.__new__(torch_op._GpuRank)
    rank.name, rank.lock, rank.device = "coconet::x", threading.Lock(), "cuda:0"
    rank.context = torch_op.context_struct()()
    rank.lib = SimpleNamespace(
        coco_gpu_check_waits=_Function(5), coco_last_error=_Function(report)
    )
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    with pytest.raises(GpuRunError, match="coconet::x: device watchdog: 1 signal"):
        rank.check_waits()
    rank.lib.coco_gpu_check_waits = _Function(0)
    rank.check_waits()  # no failed wait: nothing


def test_torch_compile_keeps_the_op_in_the_graph(torch):
    op = register("adam", world=1)
    namespace, name = op.name.split("::")
    target = getattr(getattr(torch.ops, namespace), name).default
    targets: list = []

    def backend(graph, example_inputs):
        targets.extend(node.target for node in graph.graph.nodes)
        return graph.forward

    def step(*tensors):
        op(*tensors)
        return tensors[1] * 2

    eager = op.shard(seed=6)
    compiled = op.shard(seed=6)
    doubled = torch.compile(step, backend=backend, fullgraph=True)(*compiled)
    assert target in targets
    step(*eager)
    assert torch.equal(doubled, eager[1] * 2)
    assert all(torch.equal(a, b) for a, b in zip(eager, compiled))


# ---------------------------------------------------------------------------
# Several processes over torch.distributed (gloo, and NCCL on GPUs)
# ---------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import torch
    import torch.distributed as dist
    from coconet_ir import torch_op

    out, rank, world, mode, jobs = sys.argv[1:6]
    rank, world = int(rank), int(world)
    gpu = mode == "cuda"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if gpu else "gloo", init_method=f"file://{out}/store",
        rank=rank, world_size=world,
    )
    for k, (program, cpu, passes) in enumerate(json.loads(jobs)):
        if cpu == "unique-id":  # program: a library built with nvcc
            import ctypes
            lib = ctypes.CDLL(program)
            print(torch_op.unique_id(lib, None, rank, world).hex())
            continue
        op = torch_op.register(
            program, f"worker::op{k}", cpu=cpu, passes=passes or torch_op.DEFAULT_PASSES
        )
        assert op.world == world
        tensors = op.shard(rank=rank, seed=5, device="cuda" if gpu else "cpu")
        returned = op(*tensors)
        results = [] if returned is None else [returned]
        pairs = [(s, t) for s, t in zip(op.arguments, tensors) if s.updated]
        pairs += list(zip(op.results, results))
        saved = {s.key: torch_op.to_numpy(t, s) for s, t in pairs}
        np.savez(f"{out}/job{k}-rank{rank}.npz", **saved)
        op.close()
    dist.destroy_process_group()
    """
)

Job = tuple[str, str, str]
"""(program, cpu or "unique-id", passes) for WORKER."""


def run_ranks(tmp_path: Path, world: int, mode: str, jobs: list[Job]) -> list[str]:
    """WORKER on `world` processes, each running `jobs` in order (processes
    are started once: each imports torch, a few seconds); each one's stdout."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_VISIBLE")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(tmp_path),
                str(r),
                str(world),
                mode,
                json.dumps(jobs),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in range(world)
    ]
    printed = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        printed.append(stdout)
    return printed


def check_ranks(
    tmp_path: Path,
    job: int,
    example: str,
    world: int,
    exact: bool,
    passes: str = torch_op.DEFAULT_PASSES,
) -> None:
    op = register(example, world=world, passes=passes)
    run = cc.interpret(op.module, world, seed=5)
    for rank in range(world):
        with np.load(tmp_path / f"job{job}-rank{rank}.npz") as saved:
            want = rank_outputs(op, run, rank)
            assert sorted(saved.files) == sorted(want)
            for key, value in want.items():
                if exact:
                    assert np.array_equal(saved[key], value), (rank, key)
                else:
                    np.testing.assert_allclose(
                        saved[key], value, rtol=1e-5, atol=1e-5, err_msg=key
                    )


GLOO_JOBS = [
    ("megatron", "interpreter", ""),
    # The fused all-reduce: the processes' kernels store into each other's
    # shared-memory workspaces (a rank per process). The NCCL calls between
    # processes: the training example (test_training_example.py).
    ("adam", "emulator", "coco-optimize"),
]


def test_two_cpu_ranks_over_gloo_are_the_interpreter(torch, tmp_path):
    """Each process gets its own rank's shards and keeps its own share: every
    job of GLOO_JOBS, one after the other in the same two processes."""
    jobs = [(str(EXAMPLES_DIR / f"{e}.mlir"), cpu, p) for e, cpu, p in GLOO_JOBS]
    run_ranks(tmp_path, 2, "cpu", jobs)
    for k, (example, cpu, passes) in enumerate(GLOO_JOBS):
        check_ranks(
            tmp_path,
            k,
            example,
            2,
            exact=cpu == "interpreter",
            passes=passes or torch_op.DEFAULT_PASSES,
        )


needs_toolchain = pytest.mark.skipif(
    nvcc() is None or not nccl_include_dirs(),
    reason="nvcc or the nvidia-nccl-cu13/nvidia-cublas wheels are not installed",
)


@needs_toolchain
def test_every_rank_gets_rank_zeros_nccl_unique_id(torch, tmp_path):
    """The id exchange of the GPU kernel's first call, with the built
    library's NCCL over gloo (ncclGetUniqueId needs no GPU). Processes of
    their own: a process that had also loaded an emulated library sometimes
    aborted at exit ("terminate called without an active exception"; about
    1 in 6 runs, cause not found)."""
    from coconet_ir.backend.cuda.gpu_run import compile_gpu

    library = compile_gpu(register("sgd", world=2).lowered.cuda, "sm_90")
    printed = run_ranks(tmp_path, 2, "cpu", [(str(library), "unique-id", "")])
    ids = [p.strip() for p in printed]
    assert len(ids[0]) == 2 * 128 and ids[0] == ids[1]
    assert ids[0] != "00" * 128


@pytest.mark.skipif(shutil.which(compiler()) is None, reason="no C++ compiler")
def test_enqueue_passes_tensors_to_a_host_entry(torch):
    """`enqueue`, the GPU kernel's call, on an emulated library and context
    in this process: the entry reads and writes the tensors' memory."""
    from coconet_ir.backend.emu import compile_emulated

    op = register("megatron", world=1)
    lib = ctypes.CDLL(str(compile_emulated(op.lowered.cuda)))
    lib.coco_emu_create.restype = ctypes.c_void_p
    lib.coco_emu_create.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_size_t] * 2
    lib.coco_emu_context.restype = ctypes.c_void_p
    lib.coco_emu_context.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.coco_emu_synchronize.argtypes = [ctypes.c_void_p]
    lib.coco_emu_destroy.argtypes = [ctypes.c_void_p]
    world = lib.coco_emu_create(1, 1, 0, 1)
    try:
        context = lib.coco_emu_context(world, 0, 0)
        fields = torch_op.context_struct().from_address(context)
        assert (fields.rank, fields.world, fields.num_stages) == (0, 1, 1)
        tensors = op.shard(seed=8)
        result = torch.zeros(op.results[0].shape)
        torch_op.enqueue(lib, "coco_megatron", context, [*tensors, result])
        assert lib.coco_emu_synchronize(context) == 0
    finally:
        lib.coco_emu_destroy(world)
    want = rank_outputs(op, cc.interpret(op.module, 1, seed=8), 0)
    np.testing.assert_allclose(
        result.numpy(), want["megatron.result0"], rtol=1e-5, atol=1e-5
    )


def gpus() -> int:
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@needs_toolchain
@pytest.mark.parametrize("example", ["sgd", "megatron"])
def test_one_gpu_is_the_interpreter(torch, example):
    if gpus() < 1:
        pytest.skip("no GPU")
    op = register(example, world=1)
    tensors = op.shard(seed=9, device="cuda")
    got = op_outputs(op, tensors, op(*tensors))
    torch.cuda.synchronize()
    op.close()
    want = rank_outputs(op, cc.interpret(op.module, 1, seed=9), 0)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5)


@needs_toolchain
@pytest.mark.parametrize("example", ["adam", "megatron"])
def test_two_gpus_over_nccl_are_the_interpreter(torch, tmp_path, example):
    if gpus() < 2:
        pytest.skip("fewer than 2 GPUs")
    run_ranks(
        tmp_path,
        2,
        "cuda",
        [(str(EXAMPLES_DIR / f"{example}.mlir"), "interpreter", "")],
    )
    check_ranks(tmp_path, 0, example, 2, exact=False)
