"""coco-autotune{machine=h100x8 world=N report=false}: the schedule the cost
model predicts fastest, among a bounded, deterministic set of candidates
(docs/passes/coco-autotune.md).

The candidates, in the order they are tried (ties go to the earlier one):

- `coco-optimize` with its defaults (so the best is never predicted slower
  than coco-optimize), and the program as written;
- `coco-optimize` with each overlap setting: `overlap_mode` auto, chunks or
  per_peer, `chunks` 2, 4 or 8, `overlap=false`;
- `coco-optimize` with each of its parts switched off (every boolean option
  that defaults to true: `fuse=false`, `slice_state=false`, ...), and with
  each bucket size when coco-optimize has a `bucket_bytes` option;
- coco-optimize written out as its passes, with what coco-optimize does not
  let one choose: the split dim (`coco-split-all-reduce{dim=D}`), the chunk
  dim and count of a forced chunked overlap (`coco-overlap{chunks=K dim=D}`),
  the overlap taken before coco-fuse, coco-fuse without slice reductions;
  and CoCoNet's split + reorder + fuse (+ overlap) without the rest;
- then each part switched off together with each overlap setting, for the
  parts and settings that changed the program on their own.

Every candidate is a pipeline of passes, applied to a copy of the module with
each pass's own preconditions: a pass that refuses, or a varied option that
transforms nothing (the pass's warning), makes the candidate *refused*, with
the reason, and the search goes on. Each result is verified and predicted by
`coconet_ir.costmodel` (`predict`, the slowest function as `total_time`);
results that print the same as an earlier one are marked as such. Nothing is
random: the same module gives the same candidates, predictions and choice.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from math import floor, log10
from typing import Any, cast

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass

from coconet_ir import ir
from coconet_ir.costmodel import (
    DEFAULT_MACHINE,
    Machine,
    Prediction,
    machine,
    predict,
    total_time,
)
from coconet_ir.diagnostics import CocoError, CocoWarning
from coconet_ir.dialects.coco import AllReduceOp, MatmulOp, tensor_type, world_size
from coconet_ir.passes.base import CocoPass, Rewrite, move_contents
from coconet_ir.passes.dce import CocoDCE
from coconet_ir.passes.fuse import Fuse
from coconet_ir.passes.fuse_send import FuseSend
from coconet_ir.passes.optimize import KeepTheFaster, Optimize
from coconet_ir.passes.overlap import Overlap
from coconet_ir.passes.reorder import Reorder
from coconet_ir.passes.split_all_reduce import SplitAllReduce

CHUNK_COUNTS = (2, 4, 8)
"""The chunk counts tried for a chunked overlap."""

BUCKET_BYTES = (1 << 20, 4 << 20, 16 << 20, 64 << 20)
"""The bucket capacities tried, when coco-optimize buckets (`bucket_bytes`)."""

OVERLAP_SETTINGS: tuple[dict[str, Any], ...] = (
    {"chunks": 2},
    {"chunks": 8},
    {"overlap_mode": "chunks", "chunks": 2},
    {"overlap_mode": "chunks"},
    {"overlap_mode": "chunks", "chunks": 8},
    {"overlap_mode": "per_peer"},
    {"overlap": False},
)
"""coco-optimize's overlap options other than its default (auto, 4 chunks)."""

TIE_DIGITS = 4
"""Predicted times equal to this many significant digits are a tie: the
earlier candidate wins (coco-optimize's default is the first)."""

PROGRESS_AFTER = 8
"""A search of more candidates shows a progress bar (on a terminal)."""


# ============================================================================
# Candidates
# ============================================================================


@dataclass(frozen=True)
class Plan:
    """A candidate before it runs: a name and the passes that make it."""

    name: str
    passes: tuple[ModulePass, ...]
    varied: frozenset[int] = frozenset()
    """The positions of the passes whose options the search chose: their
    warning that the options transform nothing refuses the candidate."""

    @property
    def pipeline(self) -> str:
        """The `-p` pipeline (`coconet-opt -p`, `cc.Pipeline`) that makes it."""
        return ",".join(str(p.pipeline_pass_spec()) for p in self.passes)


@dataclass(frozen=True)
class ModulePrediction:
    """The cost model's prediction of one step of a module: the slowest
    function's time (pipeline stages run at once, `total_time`), and the
    launches and bytes sent of all its functions together."""

    time_s: float
    launches: int
    bytes_sent: int
    functions: dict[str, Prediction] = field(compare=False)

    @staticmethod
    def of(predictions: dict[str, Prediction]) -> ModulePrediction:
        return ModulePrediction(
            time_s=total_time(predictions),
            launches=sum(p.launches for p in predictions.values()),
            bytes_sent=sum(p.bytes_sent for p in predictions.values()),
            functions=predictions,
        )


@dataclass
class Candidate:
    """One schedule the search tried: its pipeline and, unless a pass refused,
    the module it makes and that module's prediction."""

    number: int
    """Its position in the search order (1 is coco-optimize's default)."""
    name: str
    pipeline: str
    """The `-p` pipeline that makes it (empty: the program as written)."""
    module: ModuleOp | None = None
    prediction: ModulePrediction | None = None
    refused: str | None = None
    """Why a pass refused, when one did (then no module, no prediction)."""
    same_as: int | None = None
    """The number of an earlier candidate whose module prints the same."""

    @property
    def time_s(self) -> float:
        return self.prediction.time_s if self.prediction else float("inf")


@dataclass
class AutotuneReport:
    """Every candidate, the predicted ones fastest first (ties in search
    order), then the refused ones in search order."""

    machine: Machine
    world: int
    """The world size the predictions are for."""
    candidates: list[Candidate]
    baseline: Candidate
    """coco-optimize with its defaults."""
    left_out: int = 0
    """Candidates not tried because of `max_candidates`."""
    elapsed_s: float = 0.0

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def predicted(self) -> list[Candidate]:
        return [c for c in self.candidates if c.prediction is not None]

    @property
    def refused(self) -> list[Candidate]:
        return [c for c in self.candidates if c.refused is not None]

    def named(self, name: str) -> Candidate:
        """The candidate called `name` (e.g. "as written")."""
        (found,) = [c for c in self.candidates if c.name == name]
        return found

    def table(self) -> str:
        """The report: one row per predicted candidate, then the refusals."""
        return "\n".join(report_lines(self)) + "\n"

    def __str__(self) -> str:
        return self.table()


def report_lines(report: AutotuneReport) -> list[str]:
    best, baseline = report.best, report.baseline
    lines = [
        f"coco-autotune on {report.machine.name}, {report.world} ranks: "
        f"{len(report.candidates)} candidates, {len(report.refused)} refused"
        + (f", {report.left_out} left out (max_candidates)" if report.left_out else ""),
        f"best: #{best.number} {best.name}, {micros(best.time_s)} us predicted; "
        f"coco-optimize {micros(baseline.time_s)} us; "
        f"speedup {speedup(baseline, best)}",
        f"pipeline: {best.pipeline or '(none)'}",
        "",
    ]
    header = ("#", "time (us)", "speedup", "launches", "bytes sent")
    rows = [
        (
            str(c.number),
            micros(c.time_s),
            speedup(baseline, c),
            str(c.prediction.launches),
            f"{c.prediction.bytes_sent:,}",
        )
        for c in report.predicted
        if c.prediction is not None
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    names = [
        c.name + (f" (same as #{c.same_as})" if c.same_as else "")
        for c in report.predicted
    ]
    name_width = max(len(n) for n in ["candidate", *names])

    def line(cells: Sequence[str], name: str, pipeline: str) -> str:
        numbers = "  ".join(cell.rjust(w) for cell, w in zip(cells, widths))
        return f"{numbers}  {name.ljust(name_width)}  {pipeline}".rstrip()

    lines.append(line(header, "candidate", "pipeline"))
    for cells, name, c in zip(rows, names, report.predicted):
        lines.append(line(cells, name, c.pipeline or "(none)"))
    if report.refused:
        lines += ["", "refused (not predicted):"]
        for c in report.refused:
            lines.append(f"  #{c.number} {c.name}: {c.refused}")
            lines.append(f"      {c.pipeline}")
    return lines


def micros(seconds: float) -> str:
    """Microseconds to `TIE_DIGITS` significant digits (`14.46`, `1,075`):
    the precision candidates are ranked at."""
    us = tie_key(seconds)
    decimals = max(0, TIE_DIGITS - 1 - floor(log10(us))) if us > 0 else 0
    return f"{us:,.{decimals}f}"


def speedup(baseline: Candidate, candidate: Candidate) -> str:
    """How many times faster than `baseline` the model predicts `candidate`."""
    if candidate.time_s == 0:
        return "-"
    return f"{baseline.time_s / candidate.time_s:.3f}x"


# ============================================================================
# What the search tries
# ============================================================================


def spelled(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def optimize_plan(world: int | None, **options: Any) -> Plan:
    """coco-optimize with `options` (and `world`)."""
    changed = " ".join(f"{k}={spelled(v)}" for k, v in options.items())
    name = f"coco-optimize {changed}".rstrip()
    return Plan(name, (Optimize(world=world, **options),))


def optimize_parts() -> list[str]:
    """coco-optimize's parts that can be switched off (but the overlap, which
    the overlap settings cover), in its option order."""
    return [
        f.name
        for f in fields(Optimize)
        if f.type in (bool, "bool") and f.default is True and f.name != "overlap"
    ]


def written_out(
    world: int | None, replace: dict[str, list[ModulePass]] | None = None
) -> tuple[list[ModulePass], frozenset[int]]:
    """coco-optimize's parts as a pipeline of passes (one round of
    coco-fuse-send and coco-reorder), with the parts keyed in `replace`
    (`coco-split-all-reduce`, `per-peer`, `coco-fuse`, `overlap`, ...)
    replaced; and the positions of the replacing passes."""
    replace = replace or {}
    passes: list[ModulePass] = []
    varied: set[int] = set()
    for part in Optimize(world=world).parts():
        key = part_key(part)
        if key in replace:
            varied.update(range(len(passes), len(passes) + len(replace[key])))
            passes += replace[key]
            continue
        passes.append(part)
        if isinstance(part, FuseSend):
            passes.append(Reorder())
    return passes, frozenset(varied)


def part_key(part: CocoPass) -> str:
    """The name of a part of coco-optimize; its two coco-overlaps are
    `per-peer` (before coco-fuse) and `overlap` (after)."""
    if isinstance(part, Overlap):
        return "per-peer" if part.per_peer else "overlap"
    return part.name


def passes_plan(
    name: str, world: int | None, replace: dict[str, list[ModulePass]]
) -> Plan:
    passes, varied = written_out(world, replace)
    return Plan(name, tuple(passes), varied)


def first_plans(module: ModuleOp, world: int | None) -> list[Plan]:
    """coco-optimize's default (first: another candidate must be faster to be
    chosen), and the program as written."""
    plans = [Plan("coco-optimize", (Optimize(),)), Plan("as written", ())]
    if world is not None:
        plans.append(Plan(f"coco-optimize world={world}", (Optimize(world=world),)))
    return plans


def single_plans(module: ModuleOp, world: int | None, ranks: int) -> list[Plan]:
    """One choice away from coco-optimize's default each (`ranks`: the world
    size predicted for)."""
    plans = [optimize_plan(world, **setting) for setting in OVERLAP_SETTINGS]
    plans += [optimize_plan(world, **{part: False}) for part in optimize_parts()]
    if any(f.name == "bucket_bytes" for f in fields(Optimize)):
        plans += [optimize_plan(world, bucket_bytes=b) for b in BUCKET_BYTES]
    plans.append(passes_plan("passes", world, {}))
    plans += split_dim_plans(module, world, ranks)
    plans += overlap_dim_plans(module, world)
    plans += [
        passes_plan(
            f"passes, overlap chunks={k} before coco-fuse",
            world,
            {"per-peer": [Overlap(chunks=k)], "overlap": []},
        )
        for k in CHUNK_COUNTS
    ]
    plans.append(
        passes_plan(
            "passes, coco-fuse reductions=false",
            world,
            {"coco-fuse": [Fuse(reductions=False)]},
        )
    )
    split = SplitAllReduce(world=world)
    plans.append(Plan("split, reorder, fuse", (split, Reorder(), Fuse(), CocoDCE())))
    plans.append(
        Plan(
            "split, reorder, fuse, overlap",
            (split, Reorder(), Fuse(), Overlap(), CocoDCE()),
        )
    )
    return plans


def split_dim_plans(module: ModuleOp, world: int | None, ranks: int) -> list[Plan]:
    """coco-split-all-reduce along each dim an all_reduce of the module has;
    the dim must divide among the `ranks` predicted for (without `world`, a
    dim the world size does not divide would be taken at its word)."""
    split = SplitAllReduce(world=ranks)
    operand_ranks = [
        tensor_type(op.operand).rank
        for op in module.walk()
        if isinstance(op, AllReduceOp)
    ]
    return [
        passes_plan(
            f"passes, split dim={d}",
            world,
            {"coco-split-all-reduce": [replace(split, dim=d)]},
        )
        for d in range(max(operand_ranks, default=0))
    ]


def overlap_dim_plans(module: ModuleOp, world: int | None) -> list[Plan]:
    """Every matmul that can be chunked, in K chunks along its result dim D."""
    result_ranks = [
        tensor_type(op.result).rank for op in module.walk() if isinstance(op, MatmulOp)
    ]
    return [
        passes_plan(
            f"passes, overlap chunks={k} dim={d}",
            world,
            {"per-peer": [], "overlap": [Overlap(chunks=k, dim=d)]},
        )
        for d in range(max(result_ranks, default=0))
        for k in CHUNK_COUNTS
    ]


def pair_plans(world: int | None, changed: set[str]) -> list[Plan]:
    """Each part switched off with each overlap setting, for the parts and
    settings that changed the program on their own (`changed`: the names of
    the candidates that differ from coco-optimize's default)."""
    parts = [
        p
        for p in optimize_parts()
        if optimize_plan(world, **{p: False}).name in changed
    ]
    settings = [
        s for s in OVERLAP_SETTINGS if optimize_plan(world, **s).name in changed
    ]
    return [
        optimize_plan(world, **{part: False}, **setting)
        for part in parts
        for setting in settings
    ]


# ============================================================================
# The search
# ============================================================================


@dataclass(frozen=True)
class Step:
    """One step of a candidate: a `Rewrite` (a part of coco-optimize, or a
    pass that rewrites all it applies to, its warning ignored), or a pass
    applied as a pipeline applies it, its warning a refusal when `strict` (a
    pass whose options the search chose). Steps are values: candidates whose
    steps begin alike share those steps' result."""

    action: Rewrite | KeepTheFaster | ModulePass
    strict: bool = False

    def run(self, module: ModuleOp, ctx: Context) -> None:
        with warnings.catch_warnings():
            action = "error" if self.strict else "ignore"
            warnings.simplefilter(action, CocoWarning)
            if isinstance(self.action, (Rewrite, KeepTheFaster)):
                self.action(module)
            else:
                self.action.apply(ctx, module)


def plan_steps(plan: Plan, written: ModuleOp | None = None) -> list[Step]:
    """The steps of `plan`'s passes, run on `written`: coco-optimize's parts
    (its options checked now: a refusal before any part runs) and, where it
    checks its speed against the program as written, that check (when
    coco-optimize is the plan's first pass and `written` is given), each pass
    that rewrites all it applies to as its `Rewrite` unless its options were
    chosen (`Plan.varied`), and any other pass as it is."""
    steps: list[Step] = []
    for position, each in enumerate(plan.passes):
        strict = position in plan.varied
        if isinstance(each, Optimize) and not strict:
            steps += [Step(part) for part in each.steps()]
            if each.checks_speed():
                if position != 0 or written is None:
                    raise CocoError(
                        "coco-autotune: coco-optimize checks its speed against "
                        "the program as written only as a plan's first pass"
                    )
                steps.append(Step(KeepTheFaster(each.machine, each.world, written)))
        elif isinstance(each, CocoPass) and each.rewrites_all() and not strict:
            steps.append(Step(Rewrite(each)))
        else:
            steps.append(Step(each, strict))
    return steps


Outcome = tuple[ModuleOp | None, str | None]
"""A plan's module, verified, or why a pass refused (then no module)."""


@dataclass
class Prefix:
    """A node of the trie of plans' steps: the plans whose steps end here,
    by their index, and the steps that follow in others."""

    ends: list[int] = field(default_factory=list[int])
    then: OrderedDict[Step, Prefix] = field(default_factory=OrderedDict[Step, "Prefix"])

    def plans(self) -> Iterable[int]:
        """Every plan through this node."""
        yield from self.ends
        for child in self.then.values():
            yield from child.plans()

    def merge(self, other: Prefix) -> None:
        """Take on `other`'s plans (its steps changed nothing)."""
        self.ends += other.ends
        for step, child in other.then.items():
            if step in self.then:
                self.then[step].merge(child)
            else:
                self.then[step] = child


Fingerprint = tuple[object, ...]


def fingerprint(module: ModuleOp) -> Fingerprint:
    """What a pass reads of a module and what it prints as: every op's name,
    operands, results (types and names), attributes, properties, location,
    successors and blocks with their arguments, in order, values numbered as
    first seen. Attributes, types and locations (immutable) count by
    identity: a copy shares them, so a step that changes nothing leaves the
    fingerprint of its copy unchanged, and equal fingerprints print the same
    while those objects live (not the converse). A tenth of printing's time."""
    number: dict[SSAValue | Block, int] = {}
    parts: list[object] = []
    for op in module.walk():
        parts.append(op.name)
        parts += [number.setdefault(v, len(number)) for v in op.operands]
        for r in op.results:
            parts += (number.setdefault(r, len(number)), id(r.type), r.name_hint)
        for key, value in (*op.attributes.items(), *op.properties.items()):
            parts += (key, id(value))
        parts += (id(op.location), len(op.successors), len(op.regions))
        parts += [number.setdefault(b, len(number)) for b in op.successors]
        for region in op.regions:
            parts.append(len(region.blocks))
            for block in region.blocks:
                parts += (number.setdefault(block, len(number)), len(block.args))
                for a in block.args:
                    parts += (
                        number.setdefault(a, len(number)),
                        id(a.type),
                        a.name_hint,
                    )
    return tuple(parts)


def run_plans(
    plans: Sequence[Plan],
    module: ModuleOp,
    ctx: Context,
    done: Any = None,
) -> list[Outcome]:
    """Each plan's passes on a copy of `module`, verified, or why a pass
    refused; a prefix of steps that plans share runs once, on one copy that
    is cloned where they part (`done(n)`: n more plans have their outcome)."""
    outcomes: list[Outcome | None] = [None] * len(plans)

    def settle(indices: Iterable[int], outcome: Outcome) -> None:
        indices = list(indices)
        for index in indices:
            outcomes[index] = outcome
        if done is not None:
            done(len(indices))

    root = Prefix()
    for index, plan in enumerate(plans):
        try:
            steps = plan_steps(plan, module)
        except CocoError as err:
            settle([index], (None, str(err)))
            continue
        node = root
        for step in steps:
            node = node.then.setdefault(step, Prefix())
        node.ends.append(index)

    printed: dict[Fingerprint, tuple[ModuleOp, Outcome]] = {}
    """Each module a plan ended with (kept: its fingerprint's objects live)."""

    def run(node: Prefix, state: ModuleOp, seen: Fingerprint | None = None) -> None:
        """The plans through `node`, from `state` (the module after its steps,
        `seen` its fingerprint if known): each step on a copy but the last,
        which takes `state` itself; a step that changes nothing here passes
        its plans on to `node`."""
        while node.then:
            step, child = node.then.popitem(last=False)
            last = not node.then and not node.ends
            branch = state if last else state.clone()
            try:
                step.run(branch, ctx)
            except (CocoError, CocoWarning) as err:
                settle(child.plans(), (None, str(err)))
                continue
            if last:
                run(child, branch)
                continue
            seen = seen or fingerprint(state)
            after = fingerprint(branch)
            if after == seen:
                node.merge(child)
            else:
                run(child, branch, after)
        if node.ends:
            seen = seen or fingerprint(state)
            if seen not in printed:
                printed[seen] = (state, verified(state))
            settle(node.ends, printed[seen][1])

    run(root, module.clone())
    assert all(outcome is not None for outcome in outcomes)
    return cast(list[Outcome], outcomes)


def run_plan(plan: Plan, module: ModuleOp, ctx: Context) -> Outcome:
    """`plan`'s passes on a copy of `module`, verified; or why a pass refused."""
    return run_plans([plan], module, ctx)[0]


def verified(module: ModuleOp) -> Outcome:
    try:
        ir.verify(module)
    except CocoError as err:
        return None, str(err)
    return module, None


class Search:
    """Tries plans in order, predicting each result once."""

    def __init__(
        self,
        module: ModuleOp,
        target: Machine,
        world: int | None,
        max_candidates: int | None,
    ):
        self.module = module
        self.machine = target
        self.world = world
        self.max_candidates = max_candidates
        self.ctx = ir.make_context()
        self.tried: list[Candidate] = []
        self.by_text: dict[str, Candidate] = {}
        self.by_module: dict[int, tuple[ModuleOp, Candidate]] = {}
        """Candidates by the identity of a module that was predicted or found
        alike; the module is kept here, so its id is not reused by a later
        try_all's module (which then passed as the same as this candidate)."""
        self.left_out = 0
        self.bar: Any = None

    def try_all(self, plans: Sequence[Plan]) -> list[Candidate]:
        room = len(plans)
        if self.max_candidates is not None:
            room = max(0, min(room, self.max_candidates - len(self.tried)))
        self.left_out += len(plans) - room
        self.grow_bar(room)
        outcomes = run_plans(plans[:room], self.module, self.ctx, self.advance)
        return [self.add(plan, outcome) for plan, outcome in zip(plans, outcomes)]

    def add(self, plan: Plan, outcome: Outcome) -> Candidate:
        candidate = Candidate(len(self.tried) + 1, plan.name, plan.pipeline)
        self.tried.append(candidate)
        result, refused = outcome
        if result is None:
            candidate.refused = refused
        else:
            self.predict(candidate, result)
        return candidate

    def advance(self, plans: int) -> None:
        if self.bar is not None:
            self.bar.update(plans)

    def predict(self, candidate: Candidate, result: ModuleOp) -> None:
        """Predict `result`, unless an earlier candidate's module prints the
        same (or is the same: plans that `run_plans` found alike)."""
        earlier = self.by_module.get(id(result), (None, None))[1]
        text = ""
        if earlier is None:
            text = ir.to_text(result)
            earlier = self.by_text.get(text)
        if earlier is not None:
            self.by_module[id(result)] = (result, earlier)
            candidate.same_as = earlier.same_as or earlier.number
            candidate.module, candidate.prediction = earlier.module, earlier.prediction
            return
        candidate.module = result
        candidate.prediction = ModulePrediction.of(
            predict(result, self.machine, self.world)
        )
        self.by_text[text] = candidate
        self.by_module[id(result)] = (result, candidate)

    def grow_bar(self, count: int) -> None:
        """A progress bar on a terminal, once the search is long."""
        if self.bar is None:
            total = len(self.tried) + count
            if total <= PROGRESS_AFTER or not sys.stderr.isatty():
                return
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=len(self.tried),
                desc="coco-autotune",
                unit="candidate",
                file=sys.stderr,
                leave=False,
            )
            return
        self.bar.total += count
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def autotune(
    module: ModuleOp,
    machine: Machine | str = DEFAULT_MACHINE,
    world: int | None = None,
    max_candidates: int | None = None,
) -> AutotuneReport:
    """Try the candidate schedules of `module` (not changed) and rank them by
    the cost model's prediction on `world` ranks of `machine` (a preset name
    or a `Machine`; `world` defaults to the module's `coco.world_size`, else
    the machine's GPUs). `max_candidates` stops the search after that many
    (the program as written and coco-optimize's default come first)."""
    target = check_request(machine, world, max_candidates)
    ranks = world or world_size(module) or target.gpus
    start = time.perf_counter()
    search = Search(module, target, world, max_candidates)
    try:
        baseline, written = search.try_all(first_plans(module, world))[:2]
        if written.prediction is None:  # the module itself does not verify
            raise CocoError(f"coco-autotune: {written.refused}")
        singles = search.try_all(single_plans(module, world, ranks))
        default = baseline.module
        changed = {
            c.name for c in singles if c.module is not None and c.module is not default
        }
        search.try_all(pair_plans(world, changed))
    finally:
        search.close()
    return AutotuneReport(
        machine=target,
        world=ranks,
        candidates=ranked(search.tried),
        baseline=baseline,
        left_out=search.left_out,
        elapsed_s=time.perf_counter() - start,
    )


def ranked(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Predicted fastest first, ties (times equal to `TIE_DIGITS` significant
    digits) in search order; then the refused ones, in search order."""
    return sorted(
        candidates, key=lambda c: (c.prediction is None, tie_key(c.time_s), c.number)
    )


def tie_key(seconds: float) -> float:
    """`seconds` in microseconds to `TIE_DIGITS` significant digits: the
    model is not more precise than that, so a candidate must beat an earlier
    one by more."""
    return float(f"{seconds * 1e6:.{TIE_DIGITS}g}")


def check_request(
    target: Machine | str, world: int | None, max_candidates: int | None
) -> Machine:
    """The machine asked for; a CocoError for a request no search can answer."""
    if isinstance(target, str):
        try:
            target = machine(target)
        except CocoError as err:
            raise CocoError(f"coco-autotune: {err.diagnostic.message}") from None
    if world is not None and not 1 <= world <= target.gpus:
        raise CocoError(
            f"coco-autotune: world must be between 1 and the {target.gpus} GPUs "
            f"of machine '{target.name}', got {world}"
        )
    if max_candidates is not None and max_candidates < 2:
        raise CocoError(
            f"coco-autotune: max_candidates must be >= 2, got {max_candidates}"
        )
    return target


@dataclass(frozen=True)
class Autotune(ModulePass):
    """Replace the module by the candidate schedule the cost model predicts
    fastest on `machine` (docs/passes/coco-autotune.md)."""

    name = "coco-autotune"

    machine: str = DEFAULT_MACHINE
    """The machine preset the predictions are for (costmodel.PRESETS)."""

    world: int | None = None
    """The world size (default: `coco.world_size`, else the machine's GPUs);
    also passed to the passes, as coco-optimize's `world`."""

    report: bool = False
    """Print the report (every candidate and its prediction) to stderr."""

    max_candidates: int | None = None
    """Stop the search after this many candidates (for large programs)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        found = autotune(op, self.machine, self.world, self.max_candidates)
        if self.report:
            print(found.table(), end="", file=sys.stderr)
        best = found.best.module
        assert best is not None
        move_contents(op, best.clone())
