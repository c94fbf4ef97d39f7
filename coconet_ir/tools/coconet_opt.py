"""`coconet-opt`: xdsl-opt that knows coco, its passes and its targets.

Every xdsl-opt flag works. On bad input it prints one MLIR-style diagnostic
(`file:line:col: error: ...`) and exits 1; it never shows a Python traceback.
With `--split-input-file`, locations are lines of the whole file, as in mlir-opt.
`coconet-opt -` or no file reads standard input, named `<stdin>` in diagnostics.
`-o FILE` is written only on success (a temporary file renamed into place), so
a failure leaves an existing FILE as it was.

"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.universe import Universe
from xdsl.xdsl_opt_main import xDSLOptMain

import coconet_ir.ir as ir
from coconet_ir import __version__
from coconet_ir.diagnostics import CocoError, Remark, RemarkFilter, remarks_to
from coconet_ir.pipeline import build_pipeline
from coconet_ir.tools.errors import run_guarded, write_problem
from coconet_ir.universe import (
    MLIR_SYNTAX_DIALECTS,
    get_all_dialects,
    get_all_passes,
)

GC_THRESHOLD = (100_000, 50, 100)
"""Python's cyclic garbage collector's thresholds while coconet-opt runs: a
lowering allocates millions of objects that live to the end, and with the
default thresholds (700, 10, 10) the collector walks the growing heap over and
over (a fifth of the time of a 10,000-op pipeline to CUDA). Collections still
happen, a hundred times less often."""

STDIN_NAME = "<stdin>"
"""What diagnostics on standard input name as their file, as in mlir-opt."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run with `GC_THRESHOLD`, then restore the thresholds."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)


class AtomicOutput:
    """An output file written only on success, as mlir-opt writes `-o`: the
    text goes to a temporary file in the target's directory, which `commit`
    renames over the target and `discard` removes, leaving the target as it was.
    """

    def __init__(self, path: str):
        self.target = os.path.realpath(path)  # through a symlink, to its file
        if os.path.isdir(self.target):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        directory, name = os.path.split(self.target)
        try:
            fd, self.temporary = tempfile.mkstemp(
                prefix=f".{name}.", suffix=".tmp", dir=directory
            )
        except OSError as err:  # name the file asked for, not the temporary one
            raise OSError(err.errno, write_problem(path, err), path) from None
        self.stream: IO[str] = os.fdopen(fd, "w", encoding="utf-8")

    def commit(self) -> None:
        """Put the written text in place of the target."""
        self.stream.close()
        os.chmod(self.temporary, self.target_mode())
        os.replace(self.temporary, self.target)

    def discard(self) -> None:
        """Drop the written text; the target is untouched."""
        self.stream.close()
        with suppress(FileNotFoundError):
            os.unlink(self.temporary)

    def target_mode(self) -> int:
        """The target's permissions if it exists, else the umask's default."""
        try:
            return os.stat(self.target).st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            return 0o666 & ~umask


class CocoNetOptMain(xDSLOptMain):
    version_format = (
        f"coconet-opt {__version__} (coconet-ir) built on xdsl version {{xdsl_version}}"
    )

    chunk_line_offset: int = 0
    """Lines before the chunk being parsed (non-zero with --split-input-file)."""

    output: AtomicOutput | None = None
    """The `-o` file being written, committed only when the run succeeds."""

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="coconet-ir modular optimizer driver", args=args)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        remarks = arg_parser.add_argument_group(
            "remarks",
            "optimization remarks, as mlir-opt's: what each pass did, did not "
            "do and why (docs/cli.md, Remarks). A filter is a regular "
            "expression matched against the whole pass name, e.g. "
            "--remarks-filter='coco-.*'",
        )
        remarks.add_argument(
            "--remarks",
            action="store_true",
            help="show every remark (--remarks-filter='.*')",
        )
        for option, kind in REMARK_FILTERS.items():
            which = "all remarks" if kind == "all" else f"{kind} remarks"
            remarks.add_argument(
                option,
                dest=f"remarks_filter_{kind}",
                metavar="REGEX",
                help=f"show {which} of the passes REGEX matches",
            )

    def remark_filter(self) -> RemarkFilter:
        patterns = {
            kind: getattr(self.args, f"remarks_filter_{kind}")
            for kind in REMARK_FILTERS.values()
        }
        if self.args.remarks:
            patterns["all"] = ".*"
        for pattern in patterns.values():
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as err:
                    raise CocoError(f"bad remarks filter '{pattern}': {err}") from None
        return RemarkFilter(**patterns)

    def run(self):
        accept = self.remark_filter()
        if accept.enabled:
            with remarks_to(print_remark, accept):
                self.run_writing_output()
        else:
            self.run_writing_output()

    def run_writing_output(self):
        try:
            with fewer_collections():
                super().run()
        except BaseException:
            if self.output is not None:
                self.output.discard()
            raise
        if self.output is not None:
            self.output.commit()

    def prepare_output(self) -> IO[str]:
        """stdout, or the temporary file behind `-o` (see AtomicOutput)."""
        if self.args.output_file is None:
            return sys.stdout
        self.output = AtomicOutput(self.args.output_file)
        return self.output.stream

    def reads_stdin(self) -> bool:
        """No input file, or `-`: standard input, as mlir-opt reads it."""
        return self.args.input_file in (None, "-")

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.reads_stdin():
            return sys.stdin.buffer, "mlir"
        return super().get_input_stream()

    def get_input_name(self) -> str:
        """The input's name in diagnostics: mlir-opt's `<stdin>` for standard
        input."""
        return STDIN_NAME if self.reads_stdin() else self.args.input_file

    def register_all_dialects(self):
        # The xdsl.universe entry point already brings coco when the package is
        # installed; coco is added here too when running from a source tree.
        # `gpu`, `linalg` and `shard` are xDSL's with MLIR's syntax and ops
        # (coconet_ir.dialects.gpu, .linalg, .shard).
        dialects = dict(Universe.get_multiverse().all_dialects)
        dialects.update(get_all_dialects())
        dialects.update(MLIR_SYNTAX_DIALECTS)
        for name, factory in dialects.items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        super().register_all_passes()
        for name, factory in get_all_passes().items():
            if name not in self.available_passes:
                self.register_pass(name, factory)

    def register_all_frontends(self):
        super().register_all_frontends()
        self.available_frontends["mlir"] = self.parse_mlir

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self.chunk_line_offset = start_offset
        return super().parse_chunk(chunk, file_extension, start_offset)

    def parse_mlir(self, io: IO[bytes]) -> ModuleOp:
        """Parse (not verify: the pipeline callback does) one input or chunk."""
        name = self.get_input_name()
        text = ir.source_text(io.read(), name, allow_empty=self.args.split_input_file)
        parser = ir.LocatingParser(self.ctx, text, name, self.chunk_line_offset)
        return parser.parse_module(not self.args.no_implicit_module)

    def setup_pipeline(self):
        """As xdsl-opt's, but verification reports located coco diagnostics."""
        start = time.perf_counter()

        def callback(
            previous: ModulePass | None, module: ModuleOp, upcoming: ModulePass | None
        ) -> None:
            nonlocal start
            if self.args.time_passes and previous is not None:
                elapsed = time.perf_counter() - start
                print(f"Pass {previous.name} took {elapsed} seconds")
            if not self.args.disable_verify:
                ir.verify(module)
            if previous and upcoming and self.args.print_between_passes:
                print(f"IR after {previous.name}:")
                debuginfo = self.args.print_debuginfo  # the carried locations
                Printer(stream=sys.stdout, print_debuginfo=debuginfo).print_op(module)
                print("\n\n\n")
            if self.args.time_passes and upcoming is not None:
                start = time.perf_counter()

        self.pipeline = build_pipeline(
            self.available_passes, self.args.passes, callback
        )


REMARK_FILTERS = {
    "--remarks-filter": "all",
    "--remarks-filter-passed": "passed",
    "--remarks-filter-missed": "missed",
    "--remarks-filter-failed": "failed",
    "--remarks-filter-analyse": "analysis",
}
"""mlir-opt's remark filter options → the `RemarkFilter` field each sets."""


def print_remark(remark: Remark) -> None:
    """A remark on standard error, as it is emitted (mlir-opt's `emitRemark`)."""
    print(remark, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    run_guarded("coconet-opt", lambda: CocoNetOptMain(argv).run())


if __name__ == "__main__":
    main()
