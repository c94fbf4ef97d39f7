"""What coconet-ir adds to xDSL: the coco dialect and its passes.

Registration is lazy (name → getter), as xDSL's own `get_all_dialects` and
`get_all_passes` are, so that start-up only imports what a run uses. The
`xdsl.universe` entry point in pyproject.toml points here, so plain `xdsl-opt`
and `xdsl-gui` know coco too.
"""

from collections.abc import Callable
from importlib import import_module

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe
from xdsl.utils.target import Target

PASSES: dict[str, tuple[str, str]] = {
    "coco-bucket": ("bucket", "Bucketing"),
    "coco-split-all-reduce": ("split_all_reduce", "SplitAllReduce"),
    "coco-reorder": ("reorder", "Reorder"),
    "coco-slice-state": ("slice_state", "SliceState"),
    "coco-slice-norm": ("slice_norm", "SliceNorm"),
    "coco-fuse": ("fuse", "Fuse"),
    "coco-overlap": ("overlap", "Overlap"),
    "coco-fuse-send": ("fuse_send", "FuseSend"),
    "coco-fuse-collective": ("fuse_collective", "FuseCollective"),
    "coco-dce": ("dce", "CocoDCE"),
    "coco-optimize": ("optimize", "Optimize"),
    "coco-autotune": ("autotune", "Autotune"),
    "coco-import-shard": ("import_shard", "ImportShard"),
    "coco-grad": ("grad", "CocoGrad"),
}
"""Pass name → (module in coconet_ir.passes, class)."""

LOWERINGS: dict[str, tuple[str, str]] = {
    "convert-coco-to-gpu": ("coco_to_gpu", "ConvertCocoToGpu"),
}
"""Conversion name → (module in coconet_ir.lowering, class)."""


def get_coco() -> Dialect:
    from coconet_ir.dialects.coco import Coco

    return Coco


def get_coco_gpu() -> Dialect:
    from coconet_ir.dialects.coco_gpu import CocoGpu

    return CocoGpu


def get_mlir_gpu() -> Dialect:
    """xDSL's `gpu` dialect with MLIR's syntax (coconet_ir.dialects.gpu);
    coconet-opt loads it in place of xDSL's. Not in `get_all_dialects`: a
    plugin may not redefine a dialect xDSL's own universe defines."""
    from coconet_ir.dialects.gpu import GPU

    return GPU


def get_mlir_linalg() -> Dialect:
    """xDSL's `linalg` dialect with MLIR 22's elementwise ops
    (coconet_ir.dialects.linalg); loaded in place of xDSL's, as `gpu` is."""
    from coconet_ir.dialects.linalg import Linalg

    return Linalg


def get_mlir_shard() -> Dialect:
    """xDSL's `shard` dialect with MLIR 22's collectives and process queries
    (coconet_ir.dialects.shard); loaded in place of xDSL's, as `gpu` is."""
    from coconet_ir.dialects.shard import Shard

    return Shard


MLIR_SYNTAX_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "gpu": get_mlir_gpu,
    "linalg": get_mlir_linalg,
    "shard": get_mlir_shard,
}
"""xDSL dialects that coconet-opt and `ir.make_context` replace by ours, with
MLIR 22's syntax or the ops MLIR has and xDSL lacks."""


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    return {"coco": get_coco, "coco_gpu": get_coco_gpu}


def _pass_getter(package: str, module: str, cls: str) -> Callable[[], type[ModulePass]]:
    def get() -> type[ModulePass]:
        return getattr(import_module(f"coconet_ir.{package}.{module}"), cls)

    return get


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The coco passes and the lowerings, by name, imported when first used."""
    found = {
        name: _pass_getter("passes", module, cls)
        for name, (module, cls) in PASSES.items()
    }
    found.update(
        (name, _pass_getter("lowering", module, cls))
        for name, (module, cls) in LOWERINGS.items()
    )
    return found


def get_cuda_target() -> type[Target]:
    from coconet_ir.backend.cuda.target import CudaTarget

    return CudaTarget


def get_upstream_kernels_target() -> type[Target]:
    from coconet_ir.backend.cuda.mlir_interop import UpstreamKernelsTarget

    return UpstreamKernelsTarget


def get_triton_target() -> type[Target]:
    from coconet_ir.backend.triton.target import TritonTarget

    return TritonTarget


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    return {
        "cuda": get_cuda_target,
        "upstream-kernels": get_upstream_kernels_target,
        "triton": get_triton_target,
    }


COCONET_UNIVERSE = Universe(
    all_dialects=get_all_dialects(),
    all_passes=get_all_passes(),
    all_targets=get_all_targets(),
)
