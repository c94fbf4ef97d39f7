"""lit configuration for the FileCheck suites (one folder per stage)."""

import atexit
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import lit.formats

config.name = "coconet-ir"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.excludes = ["lit.cfg.py", "forkserver.py", "Inputs"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821

# Tools come from the active environment (the README installs them there).
config.environment["PATH"] = os.environ["PATH"]  # noqa: F821
for name in ("PYTHONPATH", "HOME", "COCONET_TRACEBACK"):
    if name in os.environ:
        config.environment[name] = os.environ[name]  # noqa: F821


# `coconet-opt`, `coconet-run`, `filecheck` and `python -m
# coconet_ir.backend.cuda.mlir_interop` go through a fork server
# (forkserver.py) that imports them once for the whole run: the imports are
# most of a command's cost. RUN lines reach it through its C client
# (forkclient.c, built here) or its Python one. COCONET_LIT_FORKSERVER=0 runs
# the installed scripts instead. Each pattern matches the command word alone,
# not inside a path (this folder is called filecheck).
FORKSERVED = {
    "coconet-opt": r"(?<![\w/.-])coconet-opt(?![\w/.-])",
    "coconet-run": r"(?<![\w/.-])coconet-run(?![\w/.-])",
    "filecheck": r"(?<![\w/.-])filecheck(?![\w/.-])",
    "mlir-interop": r"\bpython -m coconet_ir\.backend\.cuda\.mlir_interop\b",
}


def start_forkserver():
    if os.environ.get("COCONET_LIT_FORKSERVER") == "0":
        return
    if not all(map(shutil.which, ("coconet-opt", "coconet-run", "filecheck"))):
        return
    script = os.path.join(os.path.dirname(__file__), "forkserver.py")
    directory = tempfile.mkdtemp(prefix="coconet-lit-")
    path = os.path.join(directory, "socket")
    tools = os.path.dirname(shutil.which("coconet-opt"))
    python = shutil.which("python3", path=tools) or sys.executable
    server = subprocess.Popen(
        [python, script, "serve", path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        env=dict(os.environ),
    )

    def stop():
        server.terminate()
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    client = build_client(directory) or f"{python} -S {script}"
    if server.stdout.readline().strip() != b"ready":
        return
    for tool, pattern in FORKSERVED.items():
        config.substitutions.append((pattern, f"{client} {path} {tool}"))  # noqa: F821


def build_client(directory):
    """The C client (forkclient.c), built while the server starts: a call
    then costs no Python start-up. None where there is no C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source = os.path.join(os.path.dirname(__file__), "forkclient.c")
    binary = os.path.join(directory, "forkclient")
    built = subprocess.run(
        [compiler, "-O2", "-o", binary, source], capture_output=True, check=False
    )
    return binary if built.returncode == 0 else None


start_forkserver()

# Real MLIR (Debian's mlir-22-tools) for the compatibility tests; tests that need
# it say `REQUIRES: mlir-opt` and are reported UNSUPPORTED where it is missing.
mlir_opt = shutil.which("mlir-opt-22") or shutil.which("mlir-opt")
if mlir_opt is None and os.path.exists("/usr/lib/llvm-22/bin/mlir-opt"):
    mlir_opt = "/usr/lib/llvm-22/bin/mlir-opt"
if mlir_opt is not None:
    config.available_features.add("mlir-opt")  # noqa: F821
    config.substitutions.append(("%mlir-opt", mlir_opt))  # noqa: F821


# ptxas and the CUDA toolkit whose libdevice mlir-opt's gpu-module-to-binary
# links (math ops become libdevice calls); tests that assemble PTX say
# `REQUIRES: ptxas` and are UNSUPPORTED where either is missing.
def cuda_toolkit():
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    ptxas_path = shutil.which("ptxas")
    if ptxas_path is not None:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(ptxas_path))))
    roots += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    for root in roots:
        libdevice = os.path.join(root or "", "nvvm/libdevice/libdevice.10.bc")
        if root and os.path.exists(libdevice):
            return root
    return None


toolkit = cuda_toolkit()
ptxas = shutil.which("ptxas")
if ptxas is not None and toolkit is not None:
    config.available_features.add("ptxas")  # noqa: F821
    config.substitutions.append(("%ptxas", ptxas))  # noqa: F821
    config.substitutions.append(("%cuda-toolkit", toolkit))  # noqa: F821
