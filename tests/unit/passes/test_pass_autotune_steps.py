"""coco-autotune runs the steps its candidates share once
(`autotune.run_plans`): the same outcomes and report as running every
candidate from scratch, each distinct prefix of steps run once."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import example

import coconet_ir as cc
from coconet_ir.passes import autotune as tuning
from coconet_ir.passes.autotune import Plan, Step, autotune, plan_steps, run_plans

EXAMPLES = ("pipeline", "megatron", "adam")
"""Candidates refused and predicted, overlaps, sends, buckets."""


@pytest.fixture
def runs(monkeypatch) -> Counter[Step]:
    """How many times each step runs (patched into `Step.run`)."""
    counts: Counter[Step] = Counter()
    run = Step.run

    def counted(step: Step, module, ctx) -> None:
        counts[step] += 1
        run(step, module, ctx)

    monkeypatch.setattr(Step, "run", counted)
    return counts


def plans_of(name: str) -> list[Plan]:
    module = example(name)
    return [
        *tuning.first_plans(module, None),
        *tuning.single_plans(module, None, 8),
        *tuning.pair_plans(
            None, {p.name for p in tuning.single_plans(module, None, 8)}
        ),
    ]


def alone(plans: list[Plan], module, ctx) -> list[tuning.Outcome]:
    """Every plan from its own copy of `module`: nothing shared."""
    return [run_plans([plan], module, ctx)[0] for plan in plans]


def printed(outcomes: list[tuning.Outcome]) -> list[tuple[str | None, str | None]]:
    return [(m and cc.to_text(m), refused) for m, refused in outcomes]


@pytest.mark.parametrize("name", EXAMPLES)
def test_shared_steps_give_what_each_plan_gives_alone(name: str):
    plans, module = plans_of(name), example(name)
    before = cc.to_text(module)
    ctx = cc.make_context()
    shared = run_plans(plans, module, ctx)
    assert printed(shared) == printed(alone(plans, module, ctx))
    assert cc.to_text(module) == before


def test_each_distinct_prefix_runs_once(runs: Counter[Step]):
    """On Adam every candidate is predicted (no refusal cuts a branch): at
    most one step run per distinct prefix of steps (fewer where a step that
    changes nothing joins two), far fewer than the plans' steps."""
    plans, module = plans_of("adam"), example("adam")
    steps = [plan_steps(plan, module) for plan in plans]
    prefixes = {tuple(s[:k]) for s in steps for k in range(1, len(s) + 1)}
    outcomes = run_plans(plans, module, cc.make_context())
    assert all(m is not None for m, _ in outcomes)
    assert runs.total() <= len(prefixes)
    assert runs.total() < sum(len(s) for s in steps) / 2


@pytest.mark.parametrize("name", ["pipeline", "sgd"])
def test_the_report_is_the_one_without_sharing(monkeypatch, name: str):
    shared = autotune(example(name))
    monkeypatch.setattr(
        tuning,
        "run_plans",
        lambda plans, module, ctx, done=None: alone(plans, module, ctx),
    )
    unshared = autotune(example(name))
    assert shared.table() == unshared.table()
    assert [c.module and cc.to_text(c.module) for c in shared.candidates] == [
        c.module and cc.to_text(c.module) for c in unshared.candidates
    ]


def test_a_fingerprint_sees_what_prints():
    """A copy has the fingerprint of its original; a renamed value, a changed
    attribute or a rewrite changes it."""
    module = example("megatron")
    copy = module.clone()
    assert tuning.fingerprint(copy) == tuning.fingerprint(module)
    renamed = module.clone()
    next(op for op in renamed.walk() if op.results).results[0].name_hint = "renamed"
    assert tuning.fingerprint(renamed) != tuning.fingerprint(module)
    optimized = cc.Pipeline("coco-optimize")(module)
    assert tuning.fingerprint(optimized) != tuning.fingerprint(module)


def test_a_step_that_changes_nothing_hands_its_plans_on(runs: Counter[Step]):
    """On SGD coco-fuse-collective rewrites nothing (no embedding, no GEMV):
    coco-optimize with and without it is one module, made once."""
    plans = [
        tuning.optimize_plan(None),
        tuning.optimize_plan(None, fuse_collective=False),
    ]
    module = example("sgd")
    (default, _), (without, _) = run_plans(plans, module, cc.make_context())
    assert default is without
    assert runs.total() == len(plan_steps(plans[0], module))
