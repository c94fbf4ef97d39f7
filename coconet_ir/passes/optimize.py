"""coco-optimize: CoCoNet's default schedule, as one pass.

In order: concatenate parameters whose updates are the same elementwise
chain into flat buckets (`coco-bucket{chains_only=true}`: one all_reduce and
one update chain per bucket, so one fused kernel per bucket instead of one per
parameter), fuse an embedding or a GEMV with the collective consuming it, and
anything with the all_to_all consuming it, into one tile-granular region
(`coco-fuse-collective{where_it_pays}`), split every all_reduce
(`coco-split-all-reduce`), move the elementwise
work after it onto the slices (`coco-reorder`), keep optimizer state that is only
used through slices sliced (`coco-slice-state`), compute the norms of
replicated values the program slices on their slices (`coco-slice-norm`), send
slices between pipeline stages (`coco-fuse-send`, then `coco-reorder` again for
the receiver's new all_gather, repeated until no more send is fused: a
pipeline of any depth in one run), decompose per peer each matmul whose
all_gather / reduce_scatter the cost model predicts is best hidden that way
(`coco-overlap{auto=true per_peer=true}`, before coco-fuse pairs a
reduce_scatter with the next all_gather), fuse reduce_scatter + compute +
all_gather (or send) into one kernel region and elementwise chains (`coco-fuse`),
chunk the remaining matmuls with the collectives that consume them where the
cost model predicts it pays (`coco-overlap{auto=true}`), and drop what became dead
(`coco-dce`). Each part can be switched off, e.g.
`coco-optimize{overlap=false chunks=2}`.

Every part applies to all ops it matches and skips the others, so the pass
never refuses; an option no op could satisfy (`chunks=0`) is refused before any
part runs. Last, a function (a pipeline's stages together) whose optimized
form the cost model predicts slower than as written is put back as written,
with a missed remark (`never_slower`, docs/passes.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from coconet_ir.costmodel.machines import DEFAULT_MACHINE, PRESETS
from coconet_ir.diagnostics import CocoError, RemarkKind, remark
from coconet_ir.dialects.coco import (
    SendOp,
    divisibility_problem,
    tensor_type,
    world_size,
)
from coconet_ir.passes.base import CocoPass, PassRefused, Rewrite


@dataclass(frozen=True)
class Optimize(ModulePass):
    """The default CoCoNet schedule; each boolean option switches a part off."""

    name = "coco-optimize"

    bucket: bool = True
    """Bucket parameters with the same update chain (coco-bucket)."""
    bucket_bytes: int = 25 * 1024 * 1024
    """The bucket capacity, in bytes of gradients (DDP's default 25 MiB)."""
    fuse_collective: bool = True
    split: bool = True
    reorder: bool = True
    slice_state: bool = True
    slice_norm: bool = True
    fuse_send: bool = True
    fuse: bool = True
    overlap: bool = True
    overlap_mode: str = "auto"
    """How a matmul overlaps its collectives: `auto` (the cost model picks none,
    chunks or per peer for each), `chunks` (always chunk where possible, as
    CoCoNet's default schedule) or `per_peer`."""
    chunks: int = 4
    """Chunks of the overlapped matmul/collective regions."""

    world: int | None = None
    """The world size the program will run on (default: `coco.world_size`;
    without either, splits must work on up to 8 ranks)."""

    machine: str = DEFAULT_MACHINE
    """The machine whose cost model chooses the overlaps (docs/performance.md)."""

    ranks_per_node: int = 0
    """Ranks on one node (0: all of them). Below the world (or with the
    world unknown), no part makes a kernel that stores into a peer's memory,
    which a rank on another node cannot reach: no fused collective, no
    per-peer overlap, coco-fuse's elementwise chains only
    (docs/gpu/device.md, "Several nodes")."""

    def several_nodes(self) -> bool:
        """Whether `ranks_per_node` puts the ranks on more than one node."""
        if self.ranks_per_node <= 0:
            return False
        return self.world is None or self.world > self.ranks_per_node

    def parts(self) -> list[CocoPass]:
        from coconet_ir.passes.bucket import Bucketing
        from coconet_ir.passes.dce import CocoDCE
        from coconet_ir.passes.fuse import Fuse
        from coconet_ir.passes.fuse_collective import FuseCollective
        from coconet_ir.passes.fuse_send import FuseSend
        from coconet_ir.passes.reorder import Reorder
        from coconet_ir.passes.slice_norm import SliceNorm
        from coconet_ir.passes.slice_state import SliceState
        from coconet_ir.passes.split_all_reduce import SplitAllReduce

        nodes = self.several_nodes()
        schedule: list[tuple[bool, CocoPass]] = [
            # Buckets first: the rest of the schedule then treats a bucket
            # as one parameter. Only whole chains: an all_reduce bucketed
            # alone would keep its consumers off the slices.
            (
                self.bucket,
                Bucketing(bytes=self.bucket_bytes, world=self.world, chains_only=True),
            ),
            # First: the collective of an embedding or a GEMV is its own
            # producer's (docs/passes/coco-fuse-collective.md), not split.
            (
                self.fuse_collective and not nodes,
                FuseCollective(where_it_pays=True),
            ),
            (self.split, SplitAllReduce(world=self.world)),
            (self.reorder, Reorder()),
            (self.slice_state, SliceState()),
            (self.slice_norm, SliceNorm()),
            # To the fixpoint, with coco-reorder after each round: see apply.
            (self.fuse_send, FuseSend()),
            # Per peer takes the all_gather and reduce_scatter themselves,
            # so it chooses before coco-fuse pairs them into all-reduces.
            (
                self.overlap and self.overlap_mode != "chunks" and not nodes,
                self.per_peer_part(),
            ),
            (self.fuse, Fuse(collectives=not nodes)),
            (self.overlap and self.overlap_mode != "per_peer", self.overlap_part()),
            (True, CocoDCE()),
        ]
        return [p for enabled, p in schedule if enabled]

    def per_peer_part(self) -> CocoPass:
        """Before coco-fuse: per peer where the cost model (`auto`) or the user
        (`per_peer`) wants it."""
        from coconet_ir.passes.overlap import Overlap

        self.check_overlap_mode()
        auto = self.overlap_mode == "auto"
        return Overlap(
            chunks=self.chunks,
            per_peer=True,
            auto=auto,
            world=self.world,
            machine=self.machine,
        )

    def overlap_part(self) -> CocoPass:
        """After coco-fuse: chunks where the cost model (`auto`) or the user
        (`chunks`) wants them."""
        from coconet_ir.passes.overlap import Overlap

        self.check_overlap_mode()
        auto = self.overlap_mode == "auto"
        return Overlap(
            chunks=self.chunks, auto=auto, world=self.world, machine=self.machine
        )

    def check_overlap_mode(self) -> None:
        if self.overlap_mode not in ("auto", "chunks", "per_peer"):
            raise PassRefused(
                f"{self.name}: overlap_mode must be auto, chunks or per_peer, "
                f"got {self.overlap_mode}"
            )
        if self.machine not in PRESETS:
            raise PassRefused(
                f"{self.name}: unknown machine '{self.machine}'; the presets are "
                f"{', '.join(sorted(PRESETS))}"
            )

    never_slower: bool | None = None
    """Keep a function's schedule as written where the cost model predicts
    the optimized one slower (`keep_the_faster`). Unset: on with
    `overlap_mode=auto`; off when a mode is forced (the user's choice)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        steps = self.steps()
        written = op.clone() if self.checks_speed() else None
        for step in steps:
            step(op)
        if written is not None:
            KeepTheFaster(self.machine, self.world, written)(op)

    def checks_speed(self) -> bool:
        """Whether `never_slower` is on (unset: with `overlap_mode=auto`)."""
        if self.never_slower is None:
            return self.overlap_mode == "auto"
        return self.never_slower

    def steps(self) -> list[Rewrite]:
        """The parts as the rewrites that run in order: each rewrites what it
        applies to (no targeting, and no warning about the options
        coco-optimize gives it). Every part's options are checked first, so
        a refused option changes nothing."""
        from coconet_ir.passes.fuse_send import FuseSend

        parts = self.parts()
        for part in parts:
            part.check_options()
        return [
            FuseSends(part, self.reorder)
            if isinstance(part, FuseSend)
            else Rewrite(part)
            for part in parts
        ]


def divides_every_slice(module: ModuleOp, world: int) -> bool:
    """Whether `world` divides every sliced dim of the module's values."""
    blocks = (b for op in module.walk() for r in op.regions for b in r.blocks)
    arguments = (a for b in blocks for a in b.args)
    results = (v for op in module.walk() for v in op.results)
    return all(
        divisibility_problem(value.type, world) is None
        for value in (*arguments, *results)
    )


def stages_of(names: list[str]) -> str:
    """` for the pipeline stages @a, @b` when a group has several functions."""
    if len(names) < 2:
        return ""
    return " for the pipeline stages " + ", ".join(f"@{n}" for n in names)


@dataclass(frozen=True)
class KeepTheFaster:
    """coco-optimize's last step (`Optimize.steps` are the others; the
    autotuner runs them one by one): `keep_the_faster` against `written`,
    the module the steps started from, on `machine` at `world` ranks."""

    machine: str
    world: int | None
    written: ModuleOp

    def __call__(self, module: ModuleOp) -> None:
        keep_the_faster(self.written, module, self.machine, self.world)


def keep_the_faster(
    written: ModuleOp, optimized: ModuleOp, machine_name: str, world: int | None
) -> None:
    """Never worse than doing nothing: for each group of functions (a
    function, or a pipeline's stages together: their sends and receives
    are rewritten together), the cost model (`machine_name`, launches
    included) predicts the group as written and as optimized; where the
    optimized group is predicted slower, copies of the written
    functions replace it, with a missed remark giving both times. A
    program the model cannot predict (a sliced dim the world it is
    predicted for does not divide) is kept optimized."""
    from networkx import connected_components

    from coconet_ir.analysis.channels import PipelineChannels
    from coconet_ir.costmodel.machines import machine
    from coconet_ir.costmodel.predict import predict

    model = machine(machine_name)
    world = world or world_size(optimized) or model.gpus
    if not divides_every_slice(written, world):
        return
    try:
        before = predict(written, model, world)
        after = predict(optimized, model, world)
    except CocoError:
        return
    functions = {f.sym_name.data: f for f in optimized.ops if isinstance(f, FuncOp)}
    originals = {f.sym_name.data: f for f in written.ops if isinstance(f, FuncOp)}
    for group in connected_components(PipelineChannels.of(optimized).stages()):
        names = sorted(n for n in group if n in before and n in after)
        if not names or set(group) - set(originals):
            continue
        was = max(before[n].time_s for n in names)
        now = max(after[n].time_s for n in names)
        if now <= was * (1 + 1e-9):
            continue
        for name in sorted(group):
            Rewriter.replace_op(functions[name], originals[name].clone())
        remark(
            RemarkKind.MISSED,
            Optimize.name,
            "Schedule",
            f"kept the schedule as written{stages_of(names)}: the cost model "
            f"({model.name}, {world} ranks) predicts {now * 1e6:.3f} us optimized "
            f"against {was * 1e6:.3f} us as written",
            originals[names[0]],
        )


@dataclass(frozen=True)
class FuseSends(Rewrite):
    """coco-fuse-send, then coco-reorder when `reorder` (the receiver's new
    all_gather lets its elementwise consumers move onto slices, so the next
    stage's send may now send a slice too), until no more send is fused: one
    round per hop of a pipeline of any depth."""

    reorder: bool = True

    def __call__(self, module: ModuleOp) -> None:
        from coconet_ir.passes.reorder import Reorder

        fused = fused_sends(module)
        while True:
            self.part.rewrite(module)
            if self.reorder:
                Reorder().rewrite(module)
            now = fused_sends(module)
            if now == fused:
                return
            fused = now


def fused_sends(module: ModuleOp) -> int:
    """The sends of a slice (what coco-fuse-send makes)."""
    return sum(
        1
        for op in module.walk()
        if isinstance(op, SendOp) and tensor_type(op.operand).layout.is_sliced
    )
