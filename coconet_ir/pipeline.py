"""Pass pipelines: the `-p` string syntax and the Python pipeline object.

```python
import coconet_ir as cc
pipeline = cc.Pipeline("coco-split-all-reduce,coco-reorder{op=sum_ag}")
pipeline = cc.Pipeline([SplitAllReduce(), "coco-reorder"])   # instances or specs
optimized = pipeline(module)        # on a copy; pipeline.apply(module) in place
```

The same registry serves coconet-opt, coconet-run `-p` and the Python API: the
coco passes plus every xDSL pass (`canonicalize`, `cse`, ...). A pass's options
are the fields of its dataclass (`pass_options`); an unknown pass, an unknown
option or a value of the wrong kind is a `PassSpecError` that says so in words.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.utils.arg_spec import ArgSpec, ParameterListType, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.utils.hints import isa

from coconet_ir import ir

PassRegistry = dict[str, Callable[[], type[ModulePass]]]

CLI_TOOL = "coconet-opt"
"""The command-line tool whose `--help` a PassSpecError points at by default."""
API_CONTEXT = "cc.Pipeline"
API_PASS_LIST = "coconet_ir.pipeline.available_passes() lists them"


def available_passes() -> PassRegistry:
    """xDSL's passes and the coco passes, by name."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    from coconet_ir.universe import get_all_passes as coco_passes

    return {**xdsl_passes(), **coco_passes()}


class PassSpecError(ir.CocoError):
    """An unknown pass, or an option a pass does not have or cannot take.

    `reason` is the message without context; the text is the command line's
    (`error: REASON`), or with `api=True` the Python API's
    (`error: cc.Pipeline: REASON`).
    `unknown_pass` says where the list of passes is, in either wording: the
    `--help` of the command-line tool `tool` that was given the pipeline.
    """

    def __init__(
        self,
        reason: str,
        *,
        unknown_pass: bool = False,
        api: bool = False,
        tool: str = CLI_TOOL,
    ):
        self.reason = reason
        self.unknown_pass = unknown_pass
        if api:
            listing = f"; {API_PASS_LIST}" if unknown_pass else ""
            super().__init__(f"{API_CONTEXT}: {reason}{listing}")
        else:
            listing = f" (`{tool} --help` lists them)" if unknown_pass else ""
            super().__init__(f"{reason}{listing}")

    def for_api(self) -> PassSpecError:
        """The same error worded for the Python API."""
        return PassSpecError(self.reason, unknown_pass=self.unknown_pass, api=True)

    def for_tool(self, tool: str) -> PassSpecError:
        """The same error for the command-line tool `tool`."""
        return PassSpecError(self.reason, unknown_pass=self.unknown_pass, tool=tool)


def build_pipeline(
    available: PassRegistry,
    spec: str,
    callback: PassPipelineCallbackType | None = None,
) -> PassPipeline:
    """Parse a `-p` pipeline; unknown names and bad options are PassSpecErrors.

    A malformed spec raises xDSL's `ArgSpecParseError` (reported with a caret).
    """
    return PassPipeline(parse_passes(available, spec), callback)


def parse_passes(available: PassRegistry, spec: str) -> tuple[ModulePass, ...]:
    """The passes of a `-p` spec, every name and option checked first."""
    specs = tuple(parse_pipeline(spec))
    for pass_spec in specs:
        if pass_spec.name not in available:
            raise PassSpecError(
                unknown_pass_reason(pass_spec.name, available), unknown_pass=True
            )
    return tuple(instantiate(available[s.name](), s) for s in specs)


def unknown_pass_reason(name: str, available: PassRegistry) -> str:
    """`unknown pass 'x'`, with the closest registered names if any."""
    # Above difflib's default 0.6: every coco pass shares the "coco-" prefix.
    close = difflib.get_close_matches(name, list(available), n=3, cutoff=0.7)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown pass '{name}'{hint}"


# ============================================================================
# Pass options: the dataclass fields of a pass, and what each accepts
# ============================================================================


@dataclass(frozen=True)
class PassOption:
    """One option of a pass: a field of its dataclass."""

    name: str
    """The field name; the spec may spell `_` as `-`."""
    hint: Any
    """The field's type: int, bool, str, float, a Literal, a tuple, `X | None`."""
    required: bool
    """No default: the spec must give it."""

    @property
    def kind(self) -> str:
        """What the option expects, in words: `an integer`, `a string`, ..."""
        return kind_of(self.hint)


@functools.cache
def pass_options(pass_class: type[ModulePass]) -> tuple[PassOption, ...]:
    """The options of a pass, in field order (xDSL's `from_pass_spec` rules);
    computed once per pass class (resolving its type hints takes about
    0.3 ms, and tests and autotuning parse thousands of pipelines)."""
    try:
        hints = get_type_hints(pass_class)
    except Exception:  # an unresolvable annotation: fall back to the raw one
        hints = {}
    required = pass_class.required_fields()
    return tuple(
        PassOption(f.name, hints.get(f.name, f.type), f.name in required)
        for f in dataclasses.fields(pass_class)
        if f.init and f.name != "name"
    )


def instantiate(pass_class: type[ModulePass], spec: ArgSpec) -> ModulePass:
    """The pass `spec` asks for; an option it lacks or cannot take is a
    PassSpecError naming the option and what it expects."""
    options = {option.name: option for option in pass_options(pass_class)}
    parameters: dict[str, ParameterListType] = {}
    for given, values in spec.parameters.items():
        option = options.get(given.replace("-", "_"))
        if option is None:
            raise PassSpecError(unknown_option_reason(spec.name, given, options))
        accepted = accepted_values(values, option.hint)
        if accepted is None:
            raise PassSpecError(
                f"pass '{spec.name}': option '{given}' expects {option.kind}, "
                f"got {spelled(values)}{quoting_hint(values, option)}"
            )
        parameters[option.name] = accepted
    for option in options.values():
        if option.required and option.name not in parameters:
            raise PassSpecError(
                f"pass '{spec.name}' needs option '{option.name}' ({option.kind})"
            )
    try:
        return pass_class.from_pass_spec(ArgSpec(spec.name, parameters))
    except (ValueError, TypeError) as err:  # a check of the pass's own
        raise PassSpecError(f"pass '{spec.name}': bad options: {err}") from None


def unknown_option_reason(
    pass_name: str, given: str, options: dict[str, PassOption]
) -> str:
    if not options:
        return f"pass '{pass_name}' has no option '{given}' (it takes none)"
    names = list(options)
    close = difflib.get_close_matches(given.replace("-", "_"), names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return (
        f"pass '{pass_name}' has no option '{given}' "
        f"({hint}its options: {', '.join(names)})"
    )


_REJECTED = object()
"""`coerce`'s answer for a value a type does not accept."""


def accepted_values(values: ParameterListType, hint: Any) -> ParameterListType | None:
    """`values` as the field typed `hint` takes them (ints widened to floats),
    or None if it does not take them; the same rules as xDSL's `from_spec`
    (an empty value is None for an optional field; one value, or a tuple of
    values for a tuple field), except that a boolean is not an integer."""
    if not values:
        return () if allows_none(hint) or coerce((), hint) is not _REJECTED else None
    if len(values) == 1:
        single = coerce(values[0], hint)
        if single is not _REJECTED:
            return (single,)
    several = coerce(values, hint)
    return None if several is _REJECTED else several


def is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, UnionType)


def allows_none(hint: Any) -> bool:
    return is_union(hint) and NoneType in get_args(hint)


def coerce(value: Any, hint: Any) -> Any:
    """`value` as type `hint` holds it, or `_REJECTED`."""
    if is_union(hint):
        for arm in get_args(hint):
            if (accepted := coerce(value, arm)) is not _REJECTED:
                return accepted
        return _REJECTED
    if get_origin(hint) is tuple:
        return coerce_tuple(value, get_args(hint))
    if get_origin(hint) is Literal:
        allowed = get_args(hint)
        matches = any(value == a and type(value) is type(a) for a in allowed)
        return value if matches else _REJECTED
    if hint is bool or hint is str:
        return value if isinstance(value, hint) else _REJECTED
    if hint in (int, float) and isinstance(value, bool):
        return _REJECTED  # `true` is not a number, whatever Python says
    if hint is int:
        return value if isinstance(value, int) else _REJECTED
    if hint is float:
        return float(value) if isinstance(value, int | float) else _REJECTED
    return _coerce_other(value, hint)


def _coerce_other(value: Any, hint: Any) -> Any:
    try:
        return value if isa(value, hint) else _REJECTED
    except Exception:  # a type xDSL's isa does not handle
        return _REJECTED


def coerce_tuple(value: Any, items: tuple[Any, ...]) -> Any:
    if not isinstance(value, tuple):
        return _REJECTED
    if len(items) == 2 and items[1] is Ellipsis:
        items = (items[0],) * len(value)
    if len(items) != len(value):
        return _REJECTED
    coerced = tuple(coerce(v, t) for v, t in zip(value, items))
    return _REJECTED if any(c is _REJECTED for c in coerced) else coerced


KINDS: dict[Any, tuple[str, str]] = {
    int: ("an integer", "integers"),
    bool: ("a boolean (true or false)", "booleans (true or false)"),
    str: ("a string", "strings"),
    float: ("a number", "numbers"),
}
"""Plain option types in words: (one value, several values)."""


def kind_of(hint: Any, plural: bool = False) -> str:
    """What a field of type `hint` accepts, in words: `an integer`, `one of
    'wse2', 'wse3'`, `a comma-separated list of integers`."""
    if is_union(hint):
        arms = [arm for arm in get_args(hint) if arm is not NoneType]
        return " or ".join(kind_of(arm, plural) for arm in arms)
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(spelled((a,)) for a in get_args(hint))
    if get_origin(hint) is tuple:
        items = get_args(hint)
        if len(items) == 2 and items[1] is Ellipsis:
            return f"a comma-separated list of {kind_of(items[0], plural=True)}"
        return f"{len(items)} comma-separated values ({', '.join(map(kind_of, items))})"
    if hint in KINDS:
        return KINDS[hint][1 if plural else 0]
    return getattr(hint, "__name__", str(hint))


def spelled(values: ParameterListType) -> str:
    """A spec value as it is written (`'abc'`, `'1,2'`, `'true'`), or `no value`."""
    if not values:
        return "no value"
    return "'" + ",".join(spelled_one(v) for v in values) + "'"


def spelled_one(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def quoting_hint(values: ParameterListType, option: PassOption) -> str:
    """For a number or a boolean the option would take as a string: how to
    write it as one (`op="12"`)."""
    if len(values) != 1 or isinstance(values[0], str):
        return ""
    as_text = spelled_one(values[0])
    if accepted_values((as_text,), option.hint) is None:
        return ""
    return f' (quote it for a string: {option.name}="{as_text}")'


# ============================================================================
# The Python pipeline object
# ============================================================================


def syntax_error_parts(err: ArgSpecParseError) -> tuple[str, str, str, str] | None:
    """xDSL's message for a malformed pipeline as (location, source line, caret
    line, message), e.g. `pass-pipeline:1:5`; None if it has another shape.

    xDSL words it as a header line, the location, the source line, and a caret
    line followed by the message.
    """
    lines = str(err).split("\n")
    if len(lines) < 4 or not lines[1].startswith("pass-pipeline:"):
        return None
    caret = lines[3].rstrip()
    message = " ".join(" ".join(lines[4:]).split()) or "malformed pipeline"
    return lines[1], lines[2], caret, message


def syntax_error_reason(spec: str, err: ArgSpecParseError) -> str:
    """`bad pass pipeline 'cse{' at column 5: Expected argument name here`."""
    parts = syntax_error_parts(err)
    if parts is None:
        return f"bad pass pipeline '{spec}': {' '.join(str(err).split())}"
    location, _, _, message = parts
    column = location.rsplit(":", 1)[-1]
    return f"bad pass pipeline '{spec}' at column {column}: {message}"


class Pipeline:
    """A sequence of passes, from the `-p` syntax or from pass instances.

    `apply` transforms a module in place, verifying it after every pass; calling
    the pipeline transforms a copy and returns it. A pass that refuses raises a
    CocoError and leaves the module as it was before that pass. A bad spec
    raises a CocoError (`PassSpecError` for an unknown pass or option) whose
    message starts with `cc.Pipeline:`.
    """

    def __init__(self, passes: str | Sequence[ModulePass | str]):
        if isinstance(passes, str) or not isinstance(passes, Sequence):
            passes = [passes]  # a wrong type is reported below
        available = available_passes()
        resolved: list[ModulePass] = []
        for item in passes:
            if isinstance(item, ModulePass):
                resolved.append(item)
                continue
            if not isinstance(item, str):
                raise ir.CocoError(
                    f"{API_CONTEXT}: expected a pass pipeline string or pass "
                    f"instances, got {item!r}"
                )
            try:
                resolved.extend(parse_passes(available, item))
            except PassSpecError as err:
                raise err.for_api() from None
            except ArgSpecParseError as err:
                raise ir.CocoError(
                    f"{API_CONTEXT}: {syntax_error_reason(item, err)}"
                ) from None
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
