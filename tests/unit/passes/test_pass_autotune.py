"""coco-autotune and cc.autotune (docs/passes/coco-autotune.md): never
predicted slower than coco-optimize, every candidate equivalent to the
program, deterministic, a report of every candidate, refusals reported and
not fatal, an overlapped schedule at a model's sizes."""

from __future__ import annotations

import gc
import io
import weakref
from dataclasses import fields
from functools import cache
from pathlib import Path

import pytest
from helpers import ROOT, example, load_example, ops_of
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir import costmodel
from coconet_ir.dialects import coco
from coconet_ir.passes import autotune as tuning
from coconet_ir.passes.autotune import AutotuneReport, Plan, autotune, run_plan
from coconet_ir.passes.fuse import Fuse
from coconet_ir.passes.optimize import Optimize

EXAMPLES = sorted(ROOT.glob("examples/*.mlir"))
H100 = costmodel.machine("h100x8")


def predicted_time(module: ModuleOp) -> float:
    return costmodel.total_time(costmodel.predict(module, H100))


@cache
def tuned(name: str) -> AutotuneReport:
    """The example's report (one search per example and test process)."""
    return autotune(example(name), "h100x8")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_never_predicted_slower_than_coco_optimize(path: Path):
    report = tuned(path.stem)
    optimized = cc.Pipeline("coco-optimize")(example(path.stem))
    best = report.best
    assert best.module is not None and best.prediction is not None
    assert best.time_s <= predicted_time(optimized)
    assert best.time_s == predicted_time(best.module)
    assert report.baseline.pipeline == "coco-optimize"
    assert report.baseline.time_s == predicted_time(optimized)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_candidate_is_equivalent_to_the_program(path: Path):
    """The best on 2, 4 and 8 ranks; every other distinct candidate on 4."""
    original = example(path.stem)
    report = tuned(path.stem)
    best = report.best.module
    assert best is not None
    for world in (2, 4, 8):
        assert cc.equivalent(original, best, world, seed=world), world
    for candidate in report.predicted:
        if candidate.same_as is None and candidate is not report.best:
            assert candidate.module is not None
            verdict = cc.equivalent(original, candidate.module, 4)
            assert verdict, (candidate.name, verdict.first_difference)


def test_the_input_is_not_changed():
    module = example("megatron")
    before = cc.to_text(module)
    autotune(module)
    assert cc.to_text(module) == before


def test_deterministic():
    """Two searches: the same candidates in the same order, the same report,
    byte-identical output (also through coconet-opt's pass)."""
    first, second = autotune(example("pipeline")), autotune(example("pipeline"))
    assert first.table() == second.table()
    assert [c.pipeline for c in first.candidates] == [
        c.pipeline for c in second.candidates
    ]
    assert first.best.module is not None and second.best.module is not None
    assert cc.to_text(first.best.module) == cc.to_text(second.best.module)
    by_pass = cc.Pipeline("coco-autotune")(example("pipeline"))
    assert cc.to_text(by_pass) == cc.to_text(first.best.module)


@pytest.mark.filterwarnings("ignore::coconet_ir.diagnostics.CocoWarning")
def test_the_pipeline_of_a_candidate_reproduces_it():
    """(A written-out pipeline may warn that one of coco-optimize's parts,
    given coco-optimize's options, transforms nothing here.)"""
    report = tuned("megatron")
    for candidate in report.predicted:
        assert candidate.module is not None
        remade = cc.Pipeline(candidate.pipeline)(example("megatron"))
        assert cc.to_text(remade) == cc.to_text(candidate.module), candidate.name


def test_the_report_lists_every_candidate():
    report = tuned("megatron")
    table = report.table()
    assert str(report) == table
    lines = table.splitlines()
    assert lines[0].startswith(
        f"coco-autotune on h100x8, 8 ranks: {len(report.candidates)} candidates, "
        f"{len(report.refused)} refused"
    )
    assert lines[1].startswith(f"best: #{report.best.number} {report.best.name}, ")
    assert lines[2] == f"pipeline: {report.best.pipeline}"
    header = lines[4].split()
    assert header[:7] == ["#", "time", "(us)", "speedup", "launches", "bytes", "sent"]
    rows = {line.split()[0]: line for line in lines[5 : 5 + len(report.predicted)]}
    for candidate in report.predicted:
        assert candidate.prediction is not None
        row = rows[str(candidate.number)]
        cells = row.split()
        assert cells[1] == tuning.micros(candidate.time_s)
        assert float(cells[1].replace(",", "")) == pytest.approx(
            candidate.time_s * 1e6, rel=1e-3
        )
        assert cells[3] == str(candidate.prediction.launches)
        assert cells[4] == f"{candidate.prediction.bytes_sent:,}"
        assert candidate.name in row
        assert row.endswith(candidate.pipeline or "(none)")
    for candidate in report.refused:
        assert f"#{candidate.number} {candidate.name}: {candidate.refused}" in table
    numbers = sorted(c.number for c in report.candidates)
    assert numbers == list(range(1, len(report.candidates) + 1))


def test_candidates_are_ranked_by_predicted_time_then_search_order():
    report = tuned("pipeline")
    keys = [(tuning.tie_key(c.time_s), c.number) for c in report.predicted]
    assert keys == sorted(keys)
    assert report.candidates[: len(report.predicted)] == report.predicted
    assert [c.number for c in report.refused] == sorted(
        c.number for c in report.refused
    )
    # the model says the small pipeline is launch-bound: sending the whole
    # tensor (one fused kernel fewer on each side) beats coco-optimize's
    assert report.best.time_s < report.baseline.time_s


def test_a_duplicate_is_marked_and_predicted_once():
    report = tuned("sgd")
    same = [c for c in report.predicted if c.same_as is not None]
    assert same
    by_number = {c.number: c for c in report.candidates}
    for candidate in same:
        earlier = by_number[candidate.same_as]
        assert earlier.same_as is None and earlier.number < candidate.number
        assert candidate.module is earlier.module
        assert candidate.prediction is earlier.prediction
        assert f"(same as #{earlier.number})" in report.table()


def test_a_varied_option_that_transforms_nothing_refuses_the_candidate():
    """Megatron's [4, 8, 64] result: 8 chunks do not divide dim 0, and the
    split along dim 0 does not divide among 8 ranks."""
    report = tuned("megatron")
    refused = {c.name: c.refused for c in report.refused}
    assert "8 chunks do not divide dim 0" in refused["passes, overlap chunks=8 dim=0"]
    assert "not divisible by the world size 8" in refused["passes, split dim=0"]
    assert all(c.module is None and c.prediction is None for c in report.refused)


def test_a_pass_that_refuses_is_reported_not_fatal(monkeypatch):
    refusing = Plan("fuse a missing op", (Fuse(op="nothing"),))
    module, reason = run_plan(refusing, example("sgd"), cc.make_context())
    assert module is None
    assert reason == 'error: coco-fuse: no op named "nothing" that this pass applies to'

    singles = tuning.single_plans
    monkeypatch.setattr(
        tuning, "single_plans", lambda *args: [refusing, *singles(*args)]
    )
    report = autotune(example("sgd"))
    (candidate,) = [c for c in report.refused if c.name == "fuse a missing op"]
    assert candidate.number == 3 and candidate.refused == reason
    assert f"#3 fuse a missing op: {reason}" in report.table()
    assert report.best.prediction is not None


def test_a_model_sized_program_gets_an_overlapped_schedule():
    """sequence_parallel.py --model (FLUX's all-gather + GEMM at TP=8): the
    gather is hidden behind the matmul one peer at a time."""
    sequence_parallel = load_example("sequence_parallel")
    module = sequence_parallel.build(sequence_parallel.MODEL)
    report = autotune(module, "h100x8")
    best = report.best.module
    assert best is not None
    assert ops_of(best, coco.PerPeerOp) or ops_of(best, coco.OverlapOp)
    assert report.best.time_s < report.named("as written").time_s


def test_megatron_at_the_papers_size_is_overlapped():
    """The paper's layer (B = 8, S = 2048, H = 12288) at TP = 8: the matmul's
    reduce_scatter is hidden behind it (per peer, as coco-optimize's estimate
    chooses, or in chunks); then one fused kernel and the all_gather."""
    text = (ROOT / "examples" / "megatron.mlir").read_text()
    for small, large in (("4x8x64", "8x2048x12288"), ("64x64", "12288x12288")):
        text = text.replace(small, large)
    text = text.replace("<64xf32", "<12288xf32")
    report = autotune(cc.parse(text), "h100x8")
    best = report.best.module
    assert best is not None
    (region,) = ops_of(best, coco.PerPeerOp) + ops_of(best, coco.OverlapOp)
    assert ops_of(region, coco.MatmulOp)
    assert ops_of(best, coco.FusionOp)
    written = report.named("as written")
    assert report.best.time_s < written.time_s


def test_the_pass_replaces_the_module_and_reports(capsys):
    module = example("megatron")
    cc.Pipeline("coco-autotune{report=true}").apply(module)
    report = tuned("megatron")
    assert report.best.module is not None
    assert cc.to_text(module) == cc.to_text(report.best.module)
    assert capsys.readouterr().err == report.table()
    cc.Pipeline("coco-autotune").apply(example("megatron"))
    assert capsys.readouterr().err == ""


def test_a_module_found_alike_stays_alive_with_the_search():
    """The search knows modules by identity across its batches of plans; a
    module it found printing as an earlier one's must stay alive, or a later
    batch's module can take its id and pass as that candidate (a chunked
    megatron once reported "same as #1"). The regression: weakref dies."""
    search = tuning.Search(example("megatron"), H100, None, None)
    first = example("megatron")
    search.predict(tuning.Candidate(1, "a", ""), first)
    alike = first.clone()
    seen = weakref.ref(alike)
    later = tuning.Candidate(2, "b", "")
    search.predict(later, alike)
    assert later.same_as == 1
    del alike
    gc.collect()
    assert seen() is not None


def test_world_and_machine():
    """`world=4`: predictions for 4 ranks, coco-optimize with world=4 among
    the candidates; another machine's predictions differ."""
    report = autotune(example("megatron"), "h100x8", world=4)
    assert report.world == 4
    in_order = sorted(report.candidates, key=lambda c: c.number)
    pipelines = [c.pipeline for c in in_order]
    assert pipelines[:3] == ["coco-optimize", "", "coco-optimize{world=4}"]
    assert report.best.time_s <= report.baseline.time_s
    a100 = autotune(example("megatron"), costmodel.machine("a100x8"))
    assert a100.machine.name == "a100x8"
    assert a100.baseline.time_s != tuned("megatron").baseline.time_s


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        (
            "coco-autotune{machine=tpu}",
            "error: coco-autotune: unknown machine 'tpu'; the presets are "
            "a100x8, h100x1024-ib, h100x16-ib, h100x256-ib, h100x8, h200x8, h800x8",
        ),
        (
            "coco-autotune{world=16}",
            "error: coco-autotune: world must be between 1 and the 8 GPUs of "
            "machine 'h100x8', got 16",
        ),
        (
            "coco-autotune{max_candidates=1}",
            "error: coco-autotune: max_candidates must be >= 2, got 1",
        ),
    ],
)
def test_a_bad_request_is_a_clear_error(pipeline: str, message: str):
    module = example("sgd")
    before = cc.to_text(module)
    with pytest.raises(cc.CocoError) as raised:
        cc.Pipeline(pipeline).apply(module)
    assert str(raised.value) == message
    assert cc.to_text(module) == before


def test_max_candidates_bounds_the_search():
    report = autotune(example("megatron"), max_candidates=5)
    assert len(report.candidates) == 5
    # at least what the full search tried (the pairs come from the singles)
    assert 0 < report.left_out <= len(tuned("megatron").candidates) - 5
    assert f"{report.left_out} left out (max_candidates)" in report.table()
    assert report.best.time_s <= report.baseline.time_s


def test_bucket_sizes_only_when_coco_optimize_buckets():
    buckets = any(f.name == "bucket_bytes" for f in fields(Optimize))
    pipelines = [c.pipeline for c in tuned("adam").candidates]
    assert any("bucket_bytes=" in p for p in pipelines) is buckets


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_on_a_terminal_only(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    autotune(example("sgd"))
    assert "coco-autotune" in terminal.getvalue()
    assert "candidate" in terminal.getvalue()

    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    autotune(example("sgd"))
    assert piped.getvalue() == ""

    short = Terminal()
    monkeypatch.setattr("sys.stderr", short)
    autotune(example("sgd"), max_candidates=tuning.PROGRESS_AFTER)
    assert short.getvalue() == ""
