"""Pass pipelines: the `-p` string syntax and the Python pipeline object.

```python
import coconet_ir as cc
pipeline = cc.Pipeline("coco-split-all-reduce,coco-reorder{op=sum_ag}")
pipeline = cc.Pipeline([SplitAllReduce(), "coco-reorder"])   # instances or specs
optimized = pipeline(module)        # on a copy; pipeline.apply(module) in place
```

The same registry serves coconet-opt, coconet-run `-p` and the Python API: the
coco passes plus every xDSL pass (`canonicalize`, `cse`, ...).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from coconet_ir import ir

PassRegistry = dict[str, Callable[[], type[ModulePass]]]


def available_passes() -> PassRegistry:
    """xDSL's passes and the coco passes, by name."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    from coconet_ir.universe import get_all_passes as coco_passes

    return {**xdsl_passes(), **coco_passes()}


def build_pipeline(
    available: PassRegistry,
    spec: str,
    callback: PassPipelineCallbackType | None = None,
) -> PassPipeline:
    """Parse a `-p` pipeline; unknown names and bad options are CocoErrors.

    A malformed spec raises xDSL's `ArgSpecParseError` (reported with a caret).
    """
    return PassPipeline(parse_passes(available, spec), callback)


def parse_passes(available: PassRegistry, spec: str) -> tuple[ModulePass, ...]:
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
                f"bad options for pass '{pass_spec.name}': {err}"
            ) from None
    return tuple(passes)


def unknown_pass_message(name: str, available: PassRegistry) -> str:
    """`unknown pass 'x'`, with the closest registered names if any."""
    close = difflib.get_close_matches(name, list(available), n=3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown pass '{name}'{hint} (`coconet-opt --help` lists them)"


class Pipeline:
    """A sequence of passes, from the `-p` syntax or from pass instances.

    `apply` transforms a module in place, verifying it after every pass; calling
    the pipeline transforms a copy and returns it. A pass that refuses raises a
    CocoError and leaves the module as it was before that pass.
    """

    def __init__(self, passes: str | Sequence[ModulePass | str]):
        if isinstance(passes, str):
            passes = [passes]
        available = available_passes()
        resolved: list[ModulePass] = []
        for item in passes:
            if isinstance(item, ModulePass):
                resolved.append(item)
                continue
            try:
                resolved.extend(parse_passes(available, item))
            except ArgSpecParseError as err:
                raise ir.CocoError(f"bad pass pipeline '{item}': {err}") from None
        self.passes: tuple[ModulePass, ...] = tuple(resolved)

    def __str__(self) -> str:
        return ",".join(str(p.pipeline_pass_spec()) for p in self.passes)

    def __repr__(self) -> str:
        return f"Pipeline({str(self)!r})"

    def apply(self, module: ModuleOp, ctx: Context | None = None) -> ModuleOp:
        """Run the passes on `module` itself; return it."""
        ctx = ctx or ir.make_context()
        for p in self.passes:
            p.apply(ctx, module)
            ir.verify(module)
        return module

    def __call__(self, module: ModuleOp) -> ModuleOp:
        """Run the passes on a copy of `module`; return the copy."""
        return self.apply(module.clone())
