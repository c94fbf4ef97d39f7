"""`coconet-opt`: xdsl-opt that knows coco, its passes and its targets.

Every xdsl-opt flag works. On bad input it prints one MLIR-style diagnostic
(`file:line:col: error: ...`) and exits 1; it never shows a Python traceback.
With `--split-input-file`, locations are lines of the whole file, as in mlir-opt.

`build_pipeline` is shared with `coconet-run -p`.
"""

from __future__ import annotations

import difflib
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.xdsl_opt_main import xDSLOptMain

import coconet_ir.ir as ir
from coconet_ir.tools.errors import run_guarded
from coconet_ir.universe import get_all_dialects, get_all_passes

PassRegistry = dict[str, Callable[[], type[ModulePass]]]


def build_pipeline(
    available: PassRegistry,
    spec: str,
    callback: PassPipelineCallbackType | None = None,
) -> PassPipeline:
    """Parse a `-p` pipeline; unknown names and bad options are CocoErrors.

    A malformed spec raises xDSL's `ArgSpecParseError` (reported with a caret).
    """
    specs = tuple(parse_pipeline(spec))
    for pass_spec in specs:
        if pass_spec.name not in available:
            raise ir.CocoError(unknown_pass_message(pass_spec.name, available))
    passes: list[ModulePass] = []
    for pass_spec in specs:
        try:
            passes.append(available[pass_spec.name]().from_pass_spec(pass_spec))
        except (ValueError, TypeError) as err:
            raise ir.CocoError(
                f"error: bad options for pass '{pass_spec.name}': {err}"
            ) from None
    return PassPipeline(tuple(passes), callback)


def unknown_pass_message(name: str, available: PassRegistry) -> str:
    """`error: unknown pass 'x'`, with the closest registered names if any."""
    close = difflib.get_close_matches(name, list(available), n=3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"error: unknown pass '{name}'{hint} (`coconet-opt --help` lists them)"


class CocoNetOptMain(xDSLOptMain):
    version_format = "coconet-opt built on xdsl version {xdsl_version}"

    chunk_line_offset: int = 0
    """Lines before the chunk being parsed (non-zero with --split-input-file)."""

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="coconet-ir modular optimizer driver", args=args)

    def register_all_dialects(self):
        # The xdsl.universe entry point already brings coco when the package is
        # installed; register it here only when running from a source tree.
        super().register_all_dialects()
        known = set(self.ctx.registered_dialect_names)
        for name, factory in get_all_dialects().items():
            if name not in known:
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
        source = io.read()
        name = self.get_input_name()
        if not self.args.split_input_file and not ir.strip_comments(
            source.decode("utf-8", "replace")
        ):
            raise ir.CocoError(f"{name}: error: empty input, expected a module")
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ir.CocoError(
                f"{name}: error: input is not UTF-8 text (byte {err.start})"
            ) from None
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
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n\n")
            if self.args.time_passes and upcoming is not None:
                start = time.perf_counter()

        self.pipeline = build_pipeline(
            self.available_passes, self.args.passes, callback
        )


def main(argv: Sequence[str] | None = None) -> None:
    run_guarded("coconet-opt", lambda: CocoNetOptMain(argv).run())


if __name__ == "__main__":
    main()
