"""Where nvcc, the CUDA headers and the NCCL/cuBLAS wheels are, and the nvcc
command line an emitted `.cu` compiles with (docs/gpu/cuda.md).

NCCL and cuBLAS come from the `nvidia-nccl-cu13` and `nvidia-cublas` wheels
(the `cuda` extra); their `include`/`lib` directories are found through the
`nvidia` namespace package. `COCONET_NVCC` overrides the compiler.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from coconet_ir.backend.cuda import runtime_dir

NVCC_FLAGS = ("-std=c++17", "-Werror", "all-warnings")
"""What every emitted `.cu` must compile cleanly with (besides `-arch`)."""

ARCHS = ("sm_80", "sm_90")

HARNESS = "coco_gpu_harness.h"
"""The real-GPU harness a shared library or program is built with (it includes
coco_runtime.h, whose layering comment says who includes what)."""


def nvcc() -> Path | None:
    """The nvcc to use: `$COCONET_NVCC`, then `PATH`, then
    `/usr/local/cuda/bin/nvcc`; None when there is none."""
    override = os.environ.get("COCONET_NVCC")
    if override:
        return Path(override)
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    default = Path("/usr/local/cuda/bin/nvcc")
    return default if default.exists() else None


def _nvidia_roots() -> list[Path]:
    """The directories of the `nvidia` namespace package (pip's CUDA wheels)."""
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return []
    return [Path(p) for p in getattr(nvidia, "__path__", [])]


def _wheel_dirs(header: str, kind: str) -> list[Path]:
    """`include` (kind) or `lib` dirs of the nvidia wheels that ship `header`."""
    found: list[Path] = []
    for root in _nvidia_roots():
        for package in sorted(root.iterdir()):
            if (package / "include" / header).exists() and (package / kind).is_dir():
                found.append(package / kind)
    return found


def nccl_include_dirs() -> list[Path]:
    return _wheel_dirs("nccl.h", "include")


def cublas_include_dirs() -> list[Path]:
    return _wheel_dirs("cublas_v2.h", "include")


def cuda_include_dirs() -> list[Path]:
    """The include path of an emitted `.cu` under nvcc: the runtime header's
    directory, then NCCL's and cuBLAS's (from the wheels). The CUDA toolkit's
    own include dir (cuda_runtime.h, libcu++) is nvcc's default."""
    dirs = [runtime_dir(), *nccl_include_dirs(), *cublas_include_dirs()]
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def cuda_library_dirs() -> list[Path]:
    """Where libnccl and libcublas are (for linking, `-L`)."""
    return [*_wheel_dirs("nccl.h", "lib"), *_wheel_dirs("cublas_v2.h", "lib")]


def _library_names() -> list[str]:
    """The file names of libnccl and libcublas in the wheels (they ship only
    versioned names such as `libcublas.so.13`)."""
    names: list[str] = []
    for stem in ("libnccl.so", "libcublas.so"):
        candidates = sorted(
            p.name for d in cuda_library_dirs() for p in d.glob(stem + "*")
        )
        names.append(candidates[0] if candidates else stem)
    return names


def link_flags() -> list[str]:
    """`-L`, rpath and `-l` of NCCL and cuBLAS (the wheels' versioned names)."""
    flags: list[str] = []
    for d in cuda_library_dirs():
        flags += [f"-L{d}", f"-Xlinker=-rpath,{d}"]
    return flags + [f"-l:{name}" for name in _library_names()]


def nvcc_command(
    cu_path: Path | str,
    arch: str,
    out: Path | str,
    shared: bool = False,
    *,
    executable: bool = False,
    harness: bool = False,
    optimize: bool = False,
) -> list[str]:
    """The nvcc command that compiles `cu_path` for `arch` (`sm_80`, `sm_90`)
    into `out`: an object file (`-c`), or with `shared` a shared library, or
    with `executable` a program (a file printed with `-t 'cuda{main=true}'`),
    both linked against NCCL and cuBLAS. `harness` compiles the real-GPU
    harness in (`-include coco_gpu_harness.h`, docs/gpu/running.md); `optimize`
    adds `-O3`."""
    compiler = nvcc()
    command = [str(compiler or "nvcc"), f"-arch={arch}", *NVCC_FLAGS]
    if optimize:
        command.append("-O3")
    if harness:
        command += ["-include", str(runtime_dir() / HARNESS)]
    command += [f"-I{d}" for d in cuda_include_dirs()]
    if shared:
        command += ["-shared", "-Xcompiler", "-fPIC"]
    elif not executable:
        command.append("-c")
    command += ["-x", "cu", str(cu_path), "-o", str(out)]
    if shared or executable:
        command += link_flags()
    return command


def _main(argv: list[str] | None = None) -> int:
    """`python -m coconet_ir.backend.cuda.toolchain`: print the nvcc command
    (or its flags) that builds an emitted `.cu` (docs/gpu/running.md)."""
    import argparse
    import shlex

    parser = argparse.ArgumentParser(
        prog="python -m coconet_ir.backend.cuda.toolchain",
        description="Print how to compile a .cu printed by coconet-opt -t cuda.",
    )
    parser.add_argument("file", nargs="?", default="FILE.cu", help="the .cu file")
    parser.add_argument("-o", dest="out", help="the output (default: FILE without .cu)")
    parser.add_argument("--arch", default="sm_90", help="GPU architecture (sm_90)")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument(
        "--shared", action="store_true", help="a shared library with the GPU harness"
    )
    kind.add_argument(
        "--nvcc-flags",
        action="store_true",
        help="print the flags only, not the command",
    )
    args = parser.parse_args(argv)
    source = Path(args.file)
    out = args.out or str(source.with_suffix(".so" if args.shared else ""))
    command = nvcc_command(
        source,
        args.arch,
        out,
        shared=args.shared,
        executable=not args.shared,
        harness=True,
        optimize=True,
    )
    if args.nvcc_flags:
        command = [
            c for c in command[1:] if c not in (str(source), "-o", out, "-x", "cu")
        ]
    print(shlex.join(command))
    return 0


__all__ = [
    "ARCHS",
    "NVCC_FLAGS",
    "cuda_include_dirs",
    "cuda_library_dirs",
    "link_flags",
    "nvcc",
    "nvcc_command",
]


if __name__ == "__main__":
    raise SystemExit(_main())
