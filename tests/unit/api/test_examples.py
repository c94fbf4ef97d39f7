"""The examples: each `NAME.py` builds the module of `NAME.mlir`, and the
interpreter's results on 2, 4 and 8 ranks equal a plain numpy computation of
the same math."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from math import prod

import numpy as np
import pytest
from helpers import EXAMPLES, EXAMPLES_DIR, load_example
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64

import coconet_ir as cc

NAMES = list(EXAMPLES)

PYTHON_ONLY = ["lamb_bert", "adam_bert"]
"""Examples without a .mlir twin (built at a size no file should hold)."""

SCRIPTS = ["tp_mlp_train", "triton_gemm_all_to_all"]
"""Scripts to run rather than modules to build: the training loop under
torchrun (tests/unit/frameworks/test_training_example.py), a Triton author's
fused kernel (tests/unit/triton/test_triton_language.py)."""

Inputs = dict[str, np.ndarray]


def parse_example(name: str) -> ModuleOp:
    return cc.parse_file(str(EXAMPLES_DIR / f"{name}.mlir"))


# ----------------------------------------------------------------------------
# The Python and textual forms agree
# ----------------------------------------------------------------------------


def test_every_example_is_listed() -> None:
    assert sorted(p.stem for p in EXAMPLES_DIR.glob("*.mlir")) == sorted(NAMES)
    assert sorted(p.stem for p in EXAMPLES_DIR.glob("*.py")) == sorted(
        [*NAMES, *PYTHON_ONLY, *SCRIPTS]
    )


@pytest.mark.parametrize("name", NAMES)
def test_python_builds_the_mlir_module(name: str) -> None:
    built = load_example(name).build()
    assert isinstance(built, ModuleOp)
    assert built.is_structurally_equivalent(parse_example(name))


@pytest.mark.parametrize("name", NAMES)
def test_script_prints_the_module(name: str) -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / f"{name}.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert cc.parse(run.stdout).is_structurally_equivalent(parse_example(name))


FUSED_OPERATORS = ["dlrm_embedding", "gemv_allreduce", "moe_gemm_a2a"]
"""The examples of docs/fused-operators.md: each also has MODEL sizes."""


@pytest.mark.parametrize("name", FUSED_OPERATORS)
def test_model_sizes_become_one_tile_kernel(name: str) -> None:
    """At a production model's sizes (`--model`), coco-optimize and the
    lowering for 8 ranks give the operator ONE tile-granular launch (no NCCL
    call, no cuBLAS call) whose static peer bytes are the collective's:
    all_to_all (N-1)/N of the rank's block, all_reduce 2 (N-1)/N of the
    output."""
    from coconet_ir.dialects.coco import element_info
    from coconet_ir.dialects.coco_gpu import PEER_BYTES_ATTR

    world = 8
    example = load_example(name)
    built = example.build(example.MODEL)
    (result,) = built.body.block.first_op.function_type.outputs.data
    module = cc.Pipeline(f"coco-optimize,convert-coco-to-gpu{{world={world}}}")(built)
    names = [op.name for op in module.walk()]
    assert not [n for n in names if n.startswith("coco_gpu.nccl")]
    assert "coco_gpu.gemm" not in names
    (fused,) = [
        op
        for op in module.walk()
        if op.name == "gpu.launch_func" and PEER_BYTES_ATTR in op.attributes
    ]
    size = prod(result.dims) * element_info(result.element_type).bytes
    per_peer = 2 * size // world if name == "gemv_allreduce" else size // world**2
    assert fused.attributes[PEER_BYTES_ATTR].value.data == per_peer


@pytest.mark.parametrize(
    ("name", "model_type"),
    [
        ("moe_gemm_a2a", "!coco.tensor<64x8x256x14336xbf16, sliced<0>>"),
        ("sequence_parallel_mlp", "!coco.tensor<2048x1x49152xbf16, sliced<2>>"),
        ("sequence_parallel", "!coco.tensor<4096x1x49152xbf16, sliced<2>>"),
        ("matmul_reduce_scatter", "!coco.tensor<4096x12288xbf16, sliced<0>>"),
    ],
)
def test_model_scripts_print_the_model_module(name: str, model_type: str) -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / f"{name}.py"), "--model"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert model_type in run.stdout


@pytest.mark.parametrize("name", NAMES)
def test_mlir_header_says_what_and_how_to_run(name: str) -> None:
    text = (EXAMPLES_DIR / f"{name}.mlir").read_text()
    header = text.split("\n\n", 1)[0]
    assert all(line.startswith("//") for line in header.splitlines())
    assert f"coconet-run examples/{name}.mlir --world 4" in header


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_eight_ranks(name: str) -> None:
    """Every sliced dimension divides by 8 (and so by 2 and 4)."""
    module = parse_example(name)
    module.attributes["coco.world_size"] = IntegerAttr(8, i64)
    cc.verify(module)


@pytest.mark.parametrize("name", NAMES)
def test_key_ops_are_named(name: str) -> None:
    named = [op for op in parse_example(name).walk() if "name" in op.attributes]
    assert any(op.name.startswith("coco.") for op in named)


# ----------------------------------------------------------------------------
# The interpreter agrees with numpy
# ----------------------------------------------------------------------------


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def dropout(x: np.ndarray, p: float, seed: int) -> np.ndarray:
    """`coco.dropout` on a global value, mask from the reference generator."""
    from coconet_ir.interpreter import dropout_uniform

    indices = np.arange(x.size, dtype=np.uint64).reshape(x.shape)
    keep = np.asarray(dropout_uniform(seed, indices)) >= p
    return x * keep / (1 - p)


def sgd(i: Inputs) -> Inputs:
    g, w, lr = i["sgd.arg0"], i["sgd.arg1"], i["sgd.arg2"]
    return {"sgd.arg1": w - lr * g.sum(axis=0)}


def adam_moments(i: Inputs, f: str, eps: float) -> tuple[np.ndarray, ...]:
    """(m1, v1, mhat, vhat, denominator) of Adam, as in adam.py / lamb.py."""
    g, m, v = i[f"{f}.arg0"].sum(axis=0), i[f"{f}.arg2"], i[f"{f}.arg3"]
    b1t, b2t = i[f"{f}.arg5"], i[f"{f}.arg6"]
    m1 = 0.9 * m + (1 - 0.9) * g
    v1 = 0.999 * v + (1 - 0.999) * g * g
    mhat = m1 / (1 - b1t)
    vhat = v1 / (1 - b2t)
    return m1, v1, mhat, np.sqrt(vhat) + eps


def adam(i: Inputs) -> Inputs:
    w, lr = i["adam.arg1"], i["adam.arg4"]
    m1, v1, mhat, denominator = adam_moments(i, "adam", 1e-8)
    w1 = w - lr * mhat / denominator
    return {"adam.arg1": w1, "adam.arg2": m1, "adam.arg3": v1}


def lamb(i: Inputs) -> Inputs:
    w, lr = i["lamb.arg1"], i["lamb.arg4"]
    m1, v1, mhat, denominator = adam_moments(i, "lamb", 1e-6)
    r = mhat / denominator + 0.01 * w
    trust = np.linalg.norm(w) / np.linalg.norm(r)
    return {"lamb.arg1": w - lr * trust * r, "lamb.arg2": m1, "lamb.arg3": v1}


def row_parallel_layer(i: Inputs, f: str) -> np.ndarray:
    x, w, bias, r = (i[f"{f}.arg{k}"] for k in range(4))
    return dropout(x @ w + bias, 0.1, seed=7) + r


def megatron(i: Inputs) -> Inputs:
    return {"megatron.result0": row_parallel_layer(i, "megatron")}


def pipeline(i: Inputs) -> Inputs:
    sent = row_parallel_layer(i, "stage1")
    return {"stage2.result0": gelu(sent) @ i["stage2.arg0"]}


def sequence_parallel(i: Inputs) -> Inputs:
    x, w = i["sequence_parallel.arg0"], i["sequence_parallel.arg1"]
    return {"sequence_parallel.result0": x @ w}


def matmul_reduce_scatter(i: Inputs) -> Inputs:
    a, b = i["matmul_reduce_scatter.arg0"], i["matmul_reduce_scatter.arg1"]
    return {"matmul_reduce_scatter.result0": a @ b}


def dlrm_embedding(i: Inputs) -> Inputs:
    """EmbeddingBag (sum) of every table, in f64."""
    tables = i["dlrm_embedding.arg0"]
    indices = i["dlrm_embedding.arg1"].astype(np.int64)
    rows = tables[np.arange(len(tables))[:, None, None], indices]
    return {"dlrm_embedding.result0": rows.sum(axis=2)}


def gemv_allreduce(i: Inputs) -> Inputs:
    x, w, bias = (i[f"gemv_allreduce.arg{k}"] for k in range(3))
    return {"gemv_allreduce.result0": x @ w + bias}


def moe_gemm_a2a(i: Inputs) -> Inputs:
    """Each expert's tokens times its weights, in f64."""
    tokens, w = i["moe_gemm_a2a.arg0"], i["moe_gemm_a2a.arg1"]
    out = np.einsum("esch,ehf->escf", tokens.astype(np.float64), w)
    return {"moe_gemm_a2a.result0": out}


def sequence_parallel_mlp(i: Inputs) -> Inputs:
    """The gathered activations through fc1 + bias, GELU and fc2, in f64."""
    x, w1, b1, w2 = (i[f"sequence_parallel_mlp.arg{k}"] for k in range(4))
    return {"sequence_parallel_mlp.result0": gelu(x @ w1 + b1) @ w2}


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """torch.nn.functional.layer_norm over the last dim (eps 1e-5)."""
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-5) * gamma + beta


def sequence_parallel_norm(i: Inputs) -> Inputs:
    """The ranks' partial sums added, + bias, dropout, + residual: the new
    residual stream; its LayerNorm, gathered."""
    f = "sequence_parallel_norm"
    partial, bias, r, gamma, beta = (i[f"{f}.arg{k}"] for k in range(5))
    h = dropout(partial.sum(axis=0) + bias, 0.1, seed=11) + r
    return {f"{f}.result0": h, f"{f}.result1": layer_norm(h, gamma, beta)}


def adamw_clip(i: Inputs) -> Inputs:
    """torch's clip_grad_norm_(max_norm=1) then AdamW (weight decay 0.01),
    in f64: the clipped gradients' moments and the decayed weights."""
    f, count = "adamw_clip", 3
    lr, b1t, b2t = (i[f"{f}.arg{4 * count + k}"] for k in range(3))
    grads = [i[f"{f}.arg{4 * p}"].astype(np.float64).sum(axis=0) for p in range(count)]
    norm = np.sqrt(sum((s * s).sum() for s in grads))
    clip = min(1.0, 1.0 / (norm + 1e-6))
    out: Inputs = {}
    for p, s in enumerate(grads):
        w, m, v = (i[f"{f}.arg{4 * p + k}"] for k in (1, 2, 3))
        g = s * clip
        m1 = 0.9 * m + 0.1 * g
        v1 = 0.999 * v + (1 - 0.999) * g * g
        step = (m1 / (1 - b1t)) / (np.sqrt(v1 / (1 - b2t)) + 1e-8)
        out[f"{f}.arg{4 * p + 1}"] = w * (1 - lr * 0.01) - lr * step
        out[f"{f}.arg{4 * p + 2}"] = m1
        out[f"{f}.arg{4 * p + 3}"] = v1
    return out


def megatron_norm(i: Inputs) -> Inputs:
    """The row-parallel layer's output and its LayerNorm."""
    f = "megatron_norm"
    out = row_parallel_layer(i, f)
    gamma, beta = i[f"{f}.arg4"], i[f"{f}.arg5"]
    return {f"{f}.result0": out, f"{f}.result1": layer_norm(out, gamma, beta)}


def sequence_parallel_rmsnorm(i: Inputs) -> Inputs:
    """The residual stream and its RMSNorm (eps 1e-5), in f64."""
    f = "sequence_parallel_rmsnorm"
    partial, r, weight = (i[f"{f}.arg{k}"] for k in range(3))
    h = partial.sum(axis=0) + r
    rms = np.sqrt((h * h).mean(axis=-1, keepdims=True) + 1e-5)
    return {f"{f}.result0": h, f"{f}.result1": h / rms * weight}


REFERENCES: dict[str, Callable[[Inputs], Inputs]] = {
    "sgd": sgd,
    "adam": adam,
    "lamb": lamb,
    "megatron": megatron,
    "megatron_norm": megatron_norm,
    "adamw_clip": adamw_clip,
    "pipeline": pipeline,
    "sequence_parallel": sequence_parallel,
    "matmul_reduce_scatter": matmul_reduce_scatter,
    "dlrm_embedding": dlrm_embedding,
    "gemv_allreduce": gemv_allreduce,
    "moe_gemm_a2a": moe_gemm_a2a,
    "sequence_parallel_mlp": sequence_parallel_mlp,
    "sequence_parallel_norm": sequence_parallel_norm,
    "sequence_parallel_rmsnorm": sequence_parallel_rmsnorm,
}

BIAS_CORRECTION = {"arg5": np.float32(0.9**3), "arg6": np.float32(0.999**3)}
"""beta1^t and beta2^t at step t = 3 (drawn values near 1 would make the
bias-corrected moments ill-conditioned)."""

GIVEN_INPUTS: dict[str, Inputs] = {
    name: {f"{name}.{arg}": value for arg, value in BIAS_CORRECTION.items()}
    for name in ("adam", "lamb")
}

SIGNED_INPUTS = ["sequence_parallel_mlp"]
"""Examples run on the signed inputs (`draw_inputs(signed=True)`): the drawn
ones are positive, where GELU is nearly the identity."""


TOLERANCES = {"sequence_parallel_rmsnorm": (1e-2, 1e-2)}
"""(rtol, atol) of the bf16 examples against numpy in f64: bf16 keeps 8
bits, and every op rounds (the f32 examples: 2e-4, 2e-5)."""


def test_every_example_has_a_reference() -> None:
    assert sorted(REFERENCES) == sorted(NAMES)


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("name", NAMES)
def test_interpreter_matches_numpy(name: str, world: int) -> None:
    from coconet_ir.interpreter import draw_inputs, interpret

    module = parse_example(name)
    given = GIVEN_INPUTS.get(name)
    if name in SIGNED_INPUTS:
        given = draw_inputs(module, world, seed=world, signed=True)
    result = interpret(module, world, inputs=given, seed=world)
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in result.inputs.items()}
    expected = REFERENCES[name](inputs)
    assert sorted(result.outputs) == sorted(expected)
    for key, value in expected.items():
        rtol, atol = TOLERANCES.get(name, (2e-4, 2e-5))
        np.testing.assert_allclose(
            np.asarray(result.outputs[key].value, dtype=np.float64),
            value,
            rtol=rtol,
            atol=atol,
            err_msg=f"{name} on {world} ranks: {key}",
        )


TINY_BERT = {"layers": 1, "hidden": 16, "ffn": 32, "vocab": 40, "positions": 16}


def test_lamb_bert_is_one_fusion_per_tensor_and_equivalent() -> None:
    """LAMB over BERT's 391 tensors (checked by count, built small): the
    schedule makes one region per tensor holding its reduce_scatter, both
    norms' scalar all_reduces and its all_gather, and the step computes what
    the unscheduled one does on 2 and 4 ranks."""
    lamb_bert = load_example("lamb_bert")
    bert_large = lamb_bert.parameters(lamb_bert.BERT_LARGE)
    assert len(bert_large) == 391
    assert sum(int(np.prod(shape)) for _, shape in bert_large) == 335_141_888
    shapes = lamb_bert.Shapes(**TINY_BERT)
    before = lamb_bert.build(shapes)
    after = cc.Pipeline(lamb_bert.SCHEDULE)(before)
    fusions = [op for op in after.walk() if op.name == "coco.fusion"]
    assert len(fusions) == len(lamb_bert.parameters(shapes)) == 23
    for fusion in fusions:
        kinds = [op.name for op in fusion.body.block.ops]
        assert kinds.count("coco.all_reduce") == 2, kinds
        assert kinds.count("coco.reduce_scatter") == kinds.count("coco.all_gather") == 1
    for world in (2, 4):
        verdict = cc.equivalent(before, after, world)
        assert verdict, verdict.first_difference


def test_lamb_bert_under_coco_optimize_is_one_launch_per_tensor() -> None:
    """coco-optimize gives the schedule's regions (one per tensor), and the
    lowering one cooperative kernel launch per tensor, nothing else."""
    lamb_bert = load_example("lamb_bert")
    shapes = lamb_bert.Shapes(**TINY_BERT)
    optimized = cc.Pipeline("coco-optimize")(lamb_bert.build(shapes))
    fusions = [op for op in optimized.walk() if op.name == "coco.fusion"]
    assert len(fusions) == 23
    assert all(
        op.parent_op().name == "coco.fusion"
        for op in optimized.walk()
        if op.name == "coco.all_reduce"
    )
    lowered = cc.Pipeline("convert-coco-to-gpu{world=4}")(optimized)
    launches = [op for op in lowered.walk() if op.name == "gpu.launch_func"]
    assert len(launches) == 23
    assert all("coco_gpu.cooperative" in op.attributes for op in launches)
    assert not [op for op in lowered.walk() if op.name.startswith("coco_gpu.nccl")]
