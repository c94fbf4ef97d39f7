"""The shape of a fused collective: what one fused kernel computes for a
`coco.fusion` holding reduce_scatters (docs/gpu/fused.md, "The fused all-reduce
kernel").

A fusion the kernel handles is, in body order:

- one or more `coco.reduce_scatter`s of fusion inputs (`local`, global shape
  `G`) along the same dim `D`, all with results of type `G` sliced along `D`
  (the *slice*: every rank owns `prod(G) / N` elements of it);
- elementwise ops and `coco.all_slice`s whose tensor results are slices of
  that same shape and dim (rank-0 replicated scalars are allowed too);
- `coco.reduce`s of a whole slice (every dim, kind sum/max/min) into a rank-0
  `local` partial, each used only by `coco.all_reduce`s in the body, which
  complete it into a rank-0 replicated scalar (LAMB's norms: *slice
  reductions*);
- `coco.reduce ... keep_dims` of a slice over the dims after some dim `k`
  past the cut (`k > D`): a statistic per *row* of `R = prod(G[k:])`
  elements, sliced like the slice (a LayerNorm's mean and variance: *row
  reductions*, all over the same dims), and elementwise ops on rows and
  scalars (the row's `1 / sqrt(var + eps)`);
- `coco.all_gather`s of slices, and `coco.send`s of slices or gathered values;
- the yield, of slices and gathered values.

Slice and row reductions cut the per-element work into *stages*
(`FusedPlan.stage`): stage 0 is everything computed from the reduce_scatters
and the inputs; an all_reduce's scalar and a row reduction's rows belong to
the stage after the one their operand is computed in, and an op to the latest
stage of its operands. Between two stages the kernel reduces every partial
across its grid and across the ranks (docs/gpu/fused.md, "Reductions inside a
fused kernel"); a boundary of row reductions only needs the block: chunks are
whole rows, and the block that reduces a chunk's rows in one stage computes
that chunk in the next (docs/gpu/fused.md, "Row reductions: a norm in the
kernel").

Every other operand comes from the fusion's inputs: a slice of the same type,
rows of it (sliced, the shape of a row reduction's result), or a replicated
tensor that broadcasts against `G` (it is read at each element's global
index), or elementwise arithmetic on such broadcast inputs (`convert
%weight`, computed again at each element). `FusedPlan.of` returns the plan,
or a sentence saying why the fusion is not of this shape; the lowering then
falls back to lowering the body op by op.

The per-element computation is done once per element of the rank's slice, at
the element's global coordinates, so the sliced dim needs no packing: a slice
of a tensor cut along an inner dim (Megatron's `sliced<1>`) is addressed, not
copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from math import prod

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue

from coconet_ir.dialects import coco

DEFAULT_CHUNK_ELEMENTS = 4096
"""Elements of a rank's slice per pipelined chunk (16 KiB of f32): the unit a
phase-1 signal covers, so phase 2 starts reducing chunk 0 while later chunks
are still in flight (NCCL's ring moves chunks of the same order)."""


SIGNAL_PHASES = 2
"""Slot kinds per (source rank, chunk): phase 1 ("my contribution to your
chunk c is in your scratch") and phase 2 ("my result for chunk c is in your
gather buffer, and I have consumed your contribution to it")."""

SYMMETRIC_ALIGNMENT = 256
"""Byte alignment of every symmetric buffer (cudaMalloc's)."""


@dataclass(frozen=True)
class SlotLayout:
    """Where each kind of signal slot of a fused kernel lies, from the
    kernel's first slot: the two phases of every (source rank, chunk); then,
    per scalar boundary (`FusedPlan.boundary`), a slot per source rank (its
    scalar partials are in the exchange buffers), a slot per block of this
    rank's grid (its block partials are written) and one flag (the
    boundary's scalars are ready). A row boundary needs no slot."""

    world: int
    chunks: tuple[int, ...]
    """Chunks of each part's slice (`FusedPlan.parts`), whose phase slots
    come one part after the other."""
    boundaries: int
    max_blocks: int

    def phase(self, phase: int, part: int = 0) -> int:
        before = sum(self.chunks[:part])
        return (SIGNAL_PHASES * before + phase * self.chunks[part]) * self.world

    def scalars(self, boundary: int) -> int:
        return SIGNAL_PHASES * self.world * sum(self.chunks) + boundary * self.world

    def arrivals(self, boundary: int) -> int:
        return self.scalars(self.boundaries) + boundary * self.max_blocks

    def flag(self, boundary: int) -> int:
        return self.arrivals(self.boundaries) + boundary

    @property
    def total(self) -> int:
        return self.flag(self.boundaries)


@dataclass(frozen=True)
class SymmetricLayout:
    """Where a fusion's symmetric buffers lie in its part of the workspace."""

    offsets: dict[tuple[str, Operation], int] = field(
        default_factory=dict[tuple[str, Operation], int]
    )
    """By (kind, op), as `FusedPlan.symmetric_buffers` names them."""
    total: int = 0


@dataclass(frozen=True)
class SliceGeometry:
    """The global shape `dims` of a tensor cut along `dim` into `world` blocks.

    Rank `r`'s block holds `elements` values; its element of local linear index
    `l` (row-major over the block) has the global coordinates
    `(outer, r * block + mid, inner)` where `outer, mid, inner` are `l`'s
    digits in the block shape `(prod(dims[:dim]), dims[dim] / world,
    prod(dims[dim+1:]))`."""

    dims: tuple[int, ...]
    dim: int
    world: int

    @property
    def block(self) -> int:
        """Rows of the sliced dim each rank holds."""
        return self.dims[self.dim] // self.world

    @property
    def inner(self) -> int:
        return prod(self.dims[self.dim + 1 :])

    @property
    def outer(self) -> int:
        return prod(self.dims[: self.dim])

    @property
    def elements(self) -> int:
        """Elements of one rank's slice."""
        return prod(self.dims) // self.world

    @property
    def contiguous(self) -> bool:
        """Whether every rank's block is contiguous in the row-major global
        tensor (no dim before the sliced one has more than one row)."""
        return self.outer == 1

    def global_index(self, rank: int, local: int) -> int:
        """The row-major global linear index of element `local` of `rank`'s
        block (the formula the kernel computes in `arith`)."""
        row = self.block * self.inner
        outer, rest = divmod(local, row)
        return outer * self.dims[self.dim] * self.inner + rank * row + rest


@dataclass(frozen=True)
class Part:
    """The slices of one shape in a fused kernel (a fusion over several
    parameters' slices has one part per shape: docs/gpu/fused.md, "Several
    slice shapes"): their reduce_scatters and gathers, and the chunks the
    kernel cuts a rank's slice into."""

    index: int
    geometry: SliceGeometry
    reductions: tuple[coco.ReduceScatterOp, ...]
    gathers: tuple[coco.AllGatherOp, ...]
    chunk_size: int
    """Elements of a full chunk (never more than the slice)."""

    @property
    def chunks(self) -> int:
        """Chunks of a rank's slice (the last one may be short)."""
        return -(-self.geometry.elements // self.chunk_size)

    @property
    def max_blocks(self) -> int:
        return max(self.chunks, (self.geometry.world - 1) * self.chunks)

    def holds(self, value: SSAValue) -> bool:
        """Whether `value` is a slice of this part's shape (or rows of it)."""
        t = coco.tensor_type(value)
        g = self.geometry
        return (
            t.layout.is_sliced
            and t.layout.sliced_dim == g.dim
            and t.rank == len(g.dims)
            and tuple(t.dims[: g.dim + 1]) == g.dims[: g.dim + 1]
            and all(d in (1, e) for d, e in zip(t.dims, g.dims))
        )


@dataclass(frozen=True)
class FusedPlan:
    """What a fused collective kernel does for one `coco.fusion`."""

    fusion: coco.FusionOp
    geometry: SliceGeometry
    reductions: tuple[coco.ReduceScatterOp, ...]
    compute: tuple[Operation, ...]
    """Elementwise ops, all_slices and constants, in body order."""
    gathers: tuple[coco.AllGatherOp, ...]
    sends: tuple[coco.SendOp, ...]
    slice_reductions: tuple[coco.ReduceOp, ...] = ()
    """Whole-slice `coco.reduce`s: each rank's scalar partial."""
    scalar_all_reduces: tuple[coco.AllReduceOp, ...] = ()
    """The `coco.all_reduce`s completing them."""
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
    row_reductions: tuple[coco.ReduceOp, ...] = ()
    """Keep-dims `coco.reduce`s of a slice over its trailing dims: a value
    per row of `row_length` elements (`is_row_reduction`)."""
    row_length: int = 1
    """Elements of a row (1: the fusion has no rows)."""

    # ------------------------------------------------------------------
    # Construction
    # ------------------------------------------------------------------

    @staticmethod
    def of(
        fusion: coco.FusionOp, world: int, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
    ) -> FusedPlan | str:
        """The plan of `fusion` on `world` ranks, or why the fused kernel does
        not handle it."""
        ops = [op for op in fusion.block.ops if not isinstance(op, coco.YieldOp)]
        reductions = [op for op in ops if isinstance(op, coco.ReduceScatterOp)]
        if not reductions:
            return "holds no coco.reduce_scatter"
        if chunk_elements < 1:
            return f"chunk size must be >= 1 element, got {chunk_elements}"
        shapes: dict[tuple[tuple[int, ...], int], coco.TensorType] = {}
        for op in reductions:
            t = coco.tensor_type(op.result)
            dim = t.layout.sliced_dim if t.layout.is_sliced else 0
            if t.rank == 0 or not t.layout.is_sliced or t.dims[dim] % world:
                return f"cannot cut {t} into {world} blocks"
            shapes.setdefault((tuple(t.dims), dim), t)
        slice_types = list(shapes.values())
        """One per part: slices of the same shape and cut form one part."""
        slice_type = slice_types[0]
        geometry = SliceGeometry(
            tuple(slice_type.dims), slice_type.layout.sliced_dim, world
        )
        if len(slice_types) > 1 and _has_rows(ops, slice_types):
            return "reduces rows in a fusion of several slice shapes"
        rows = _row_lengths(ops, slice_type) if len(slice_types) == 1 else set()
        if len(rows) > 1:
            return f"reduces rows of different lengths ({sorted(rows)} elements)"
        row_length = rows.pop() if rows else 1
        problems = _problems(ops, slice_types, row_length) + _yield_problems(
            fusion, slice_type
        )
        if problems:
            return problems[0]
        row_reductions = [
            op for op in ops if isinstance(op, coco.ReduceOp) and op.keeps_dims
        ]
        return FusedPlan(
            fusion,
            geometry,
            tuple(reductions),
            tuple(
                op
                for op in ops
                if isinstance(
                    op, (*coco.ELEMENTWISE_OPS, coco.AllSliceOp, coco.ConstantOp)
                )
            ),
            tuple(op for op in ops if isinstance(op, coco.AllGatherOp)),
            tuple(op for op in ops if isinstance(op, coco.SendOp)),
            tuple(
                op
                for op in ops
                if isinstance(op, coco.ReduceOp) and op not in row_reductions
            ),
            tuple(op for op in ops if isinstance(op, coco.AllReduceOp)),
            chunk_elements,
            tuple(row_reductions),
            row_length,
        )

    # ------------------------------------------------------------------
    # Derived facts
    # ------------------------------------------------------------------

    @property
    def world(self) -> int:
        return self.geometry.world

    @cached_property
    def parts(self) -> tuple[Part, ...]:
        """The slice shapes, one part each, in the order of their first
        reduce_scatter (the first part's geometry is `geometry`)."""
        found: dict[tuple[tuple[int, ...], int], list[coco.ReduceScatterOp]] = {}
        for op in self.reductions:
            t = coco.tensor_type(op.result)
            found.setdefault((tuple(t.dims), t.layout.sliced_dim), []).append(op)
        parts: list[Part] = []
        for index, ((dims, dim), reductions) in enumerate(found.items()):
            geometry = SliceGeometry(dims, dim, self.world)
            rows = -(-self.chunk_elements // self.row_length)
            size = min(rows * self.row_length, geometry.elements)
            gathers = tuple(
                op
                for op in self.gathers
                if tuple(coco.tensor_type(op.operand).dims) == dims
                and coco.tensor_type(op.operand).layout.sliced_dim == dim
            )
            parts.append(Part(index, geometry, tuple(reductions), gathers, size))
        return tuple(parts)

    @cached_property
    def components(self) -> dict[int, list[frozenset[SSAValue]]]:
        """Per part, its slice values (sliced inputs too) in groups computed
        together (connected through elementwise ops on slices, rows or
        all_slices; scalars do not connect): every parameter's chain of a
        step over many parameters is a group of its own, which the kernel
        computes in an element loop of its own, so the loops' live values
        stay those of one chain."""
        parent: dict[SSAValue, SSAValue] = {}

        def find(v: SSAValue) -> SSAValue:
            while parent[v] is not v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        def sliced(v: SSAValue) -> bool:
            t = coco.tensor_type(v)
            return t.rank > 0 and t.layout.is_sliced

        for arg in self.fusion.block.args:
            if sliced(arg):  # a sliced input: with the chains reading it
                parent.setdefault(arg, arg)
        for op in self.fusion.block.ops:
            if isinstance(op, coco.YieldOp) or not op.results:
                continue
            result = op.results[0]
            if not sliced(result):
                continue
            parent.setdefault(result, result)
            for operand in op.operands:
                if operand in parent:
                    parent[find(operand)] = find(result)
        groups: dict[SSAValue, list[SSAValue]] = {}
        for v in parent:
            groups.setdefault(find(v), []).append(v)
        found: dict[int, list[frozenset[SSAValue]]] = {p.index: [] for p in self.parts}
        for members in groups.values():
            found[self.part_of(members[0]).index].append(frozenset(members))
        return found

    def part_of(self, value: SSAValue) -> Part:
        """The part whose slices (or else rows) `value` is."""
        dims = tuple(coco.tensor_type(value).dims)
        exact = [p for p in self.parts if p.holds(value) and p.geometry.dims == dims]
        return (exact or [p for p in self.parts if p.holds(value)])[0]

    @property
    def chunks(self) -> int:
        """Chunks of a rank's slice (the last one may be short): of the first
        part's (`parts` has each one's)."""
        return self.parts[0].chunks

    @property
    def chunk_size(self) -> int:
        """Elements of a full chunk: `chunk_elements` rounded up to whole
        rows, never more than the slice (the first part's)."""
        return self.parts[0].chunk_size

    @property
    def rows(self) -> int:
        """Rows of a rank's slice (its elements when there are no rows)."""
        return self.geometry.elements // self.row_length

    @property
    def max_blocks(self) -> int:
        """The most blocks the launch asks for: one per work item of its
        busiest phase ((N-1) x chunks pushes, or the chunks of the slice), in
        its busiest part."""
        return max(part.max_blocks for part in self.parts)

    @cached_property
    def stages(self) -> dict[Operation, int]:
        """The stage every body op runs in (the module docstring): a
        `coco.reduce` in the stage of its operand, an all_reduce in the next
        one, any other op in the latest stage of its operands."""
        found: dict[Operation, int] = {}
        for op in self.fusion.block.ops:
            if isinstance(op, coco.YieldOp):
                continue
            stage = max((self.stage(v, found) for v in op.operands), default=0)
            found[op] = stage + 1 if self.is_boundary(op) else stage
        return found

    def is_boundary(self, op: Operation) -> bool:
        """Whether `op`'s result belongs to the stage after its operand's:
        an all_reduce's scalar, a row reduction's rows."""
        return isinstance(op, coco.AllReduceOp) or op in self.row_reductions

    def read_stage(self, op: Operation) -> int:
        """The stage in which `op` reads its operands."""
        return self.stages[op] - (op in self.row_reductions)

    def stage(self, value: SSAValue, stages: dict[Operation, int] | None = None) -> int:
        """The stage `value` is computed in (0 for the fusion's inputs)."""
        if not isinstance(value, OpResult):
            return 0
        return (self.stages if stages is None else stages)[value.op]

    def is_recomputed(self, op: Operation) -> bool:
        """Whether a stage that needs `op`'s value computes it again rather
        than reading it back: an all_slice (a read of an input), a constant,
        rank-0 arithmetic, arithmetic on rows (from the rows read back)."""
        if isinstance(op, coco.AllSliceOp | coco.ConstantOp):
            return True
        return isinstance(op, coco.ELEMENTWISE_OPS) and not self.is_slice(
            op.results[0]
        )

    def is_slice(self, value: SSAValue) -> bool:
        """Whether `value` has a part's slice shape (not rows, not a scalar,
        not a broadcast input's)."""
        t = coco.tensor_type(value)
        return t.layout.is_sliced and any(
            tuple(t.dims) == p.geometry.dims and t.layout.sliced_dim == p.geometry.dim
            for p in self.parts
        )

    def is_rows(self, value: SSAValue) -> bool:
        """Whether `value` holds a number per row (a row reduction's shape)."""
        t, g = coco.tensor_type(value), self.geometry
        return self.row_length > 1 and _row_length(t, g.dims, g.dim) is not None

    @cached_property
    def read_stages(self) -> dict[SSAValue, int]:
        """The last stage that reads each body value (block arguments too): a
        recomputed value is read where its users run."""
        found: dict[SSAValue, int] = {}
        for op in reversed(list(self.fusion.block.ops)):
            if isinstance(op, coco.YieldOp):
                continue
            if self.is_recomputed(op):
                stage = max((found.get(r, -1) for r in op.results), default=-1)
            else:
                stage = self.read_stage(op)
            for v in op.operands:
                found[v] = max(found.get(v, -1), stage)
        return found

    @cached_property
    def carried(self) -> tuple[SSAValue, ...]:
        """The slices a stage computes and a later stage reads: the kernel
        stores them in a buffer of the rank's slice (yielded ones in their
        result's)."""
        return tuple(
            op.results[0]
            for op in self.fusion.block.ops
            if isinstance(op, (coco.ReduceScatterOp, *coco.ELEMENTWISE_OPS))
            and not self.is_recomputed(op)
            and self.read_stages.get(op.results[0], -1) > self.stages[op]
        )

    @property
    def stage_count(self) -> int:
        """Stages of the per-element work: one more than the boundaries at
        which the kernel completes slice or row reductions."""
        ends = (*self.scalar_all_reduces, *self.row_reductions)
        return 1 + max((self.stages[op] for op in ends), default=0)

    @cached_property
    def scalar_boundaries(self) -> frozenset[int]:
        """The stages after which the kernel completes slice reductions
        across its grid and the ranks (the others end in row reductions,
        which the block completes alone)."""
        return frozenset(self.stages[op] for op in self.slice_reductions)

    @property
    def segments(self) -> list[list[int]]:
        """The stages in runs between scalar boundaries: a run's stages go
        chunk by chunk in one loop over the chunks (the grid syncs only
        between runs)."""
        runs: list[list[int]] = [[]]
        for stage in range(self.stage_count):
            runs[-1].append(stage)
            if stage in self.scalar_boundaries:
                runs.append([])
        return [run for run in runs if run]

    def boundary(self, stage: int) -> int:
        """The number of the scalar boundary after stage `stage` (its
        slots: `SlotLayout`)."""
        return sorted(self.scalar_boundaries).index(stage)

    @property
    def cooperative(self) -> bool:
        """Whether every block must be resident at once (a grid-wide combine
        of slice reductions): the launch is cooperative."""
        return bool(self.scalar_boundaries)

    def row_type(self, op: coco.ReduceOp) -> Attribute:
        """The element type of a row reduction's rows."""
        return coco.tensor_type(op.result).element_type

    @property
    def slots(self) -> SlotLayout:
        return SlotLayout(
            self.world,
            tuple(part.chunks for part in self.parts),
            len(self.scalar_boundaries),
            self.max_blocks,
        )

    @property
    def signal_slots(self) -> int:
        """Signal-pad slots the kernel uses (`slots`)."""
        return self.slots.total

    def reduction_element_bytes(self, op: coco.ReduceScatterOp) -> int:
        return coco.element_info(coco.tensor_type(op.operand).element_type).bytes

    def gather_element_bytes(self, op: coco.AllGatherOp) -> int:
        return coco.element_info(coco.tensor_type(op.operand).element_type).bytes

    def partial_type(self, op: coco.ReduceOp) -> Attribute:
        """The element type of a slice reduction's partial (and of the
        scalars its all_reduces exchange)."""
        return coco.tensor_type(op.result).element_type

    def elements(self, op: coco.ReduceScatterOp | coco.AllGatherOp) -> int:
        """Elements of a rank's slice of the part `op` reduces into or
        gathers from."""
        value = op.result if isinstance(op, coco.ReduceScatterOp) else op.operand
        return self.part_of(value).geometry.elements

    def symmetric_buffers(self) -> list[SymmetricBuffer]:
        """The kernel's buffers in the symmetric workspace, in layout order:
        each reduction's scratch and each gather's receive buffer (`world *
        slice` elements); for each slice reduction, its block partials (one
        per block, in the compute type) and the ranks' partials (one per
        rank); for each scalar all_reduce, its result."""
        n = self.world
        found = [
            SymmetricBuffer("scratch", op, _operand_type(op), n * self.elements(op))
            for op in self.reductions
        ]
        found += [
            SymmetricBuffer("gather", op, _operand_type(op), n * self.elements(op))
            for op in self.gathers
        ]
        for op in self.slice_reductions:
            t = self.partial_type(op)
            compute = coco.element_info(t).compute_type
            found.append(SymmetricBuffer("partials", op, compute, self.max_blocks))
            found.append(SymmetricBuffer("exchange", op, t, n))
        found += [
            SymmetricBuffer("result", op, _result_type(op), 1)
            for op in self.scalar_all_reduces
        ]
        return found

    def symmetric_layout(self, alignment: int = SYMMETRIC_ALIGNMENT) -> SymmetricLayout:
        """Byte offsets (from the fusion's base) of its symmetric buffers
        (`symmetric_buffers`), each aligned."""
        offsets: dict[tuple[str, Operation], int] = {}
        total = 0
        for buffer in self.symmetric_buffers():
            offsets[buffer.kind, buffer.op] = total
            total += _align(buffer.bytes, alignment)
        return SymmetricLayout(offsets, total)

    def peer_bytes(self) -> int:
        """Bytes this rank stores into each other rank per launch: its
        contribution to the peer's slice of every reduction (phase 1), its
        slice of every gathered value (phase 2), and its partial of every
        slice reduction (one scalar each)."""
        count, pushed, gathered = (
            self.elements,
            self.reduction_element_bytes,
            self.gather_element_bytes,
        )
        return (
            sum(count(op) * pushed(op) for op in self.reductions)
            + sum(count(op) * gathered(op) for op in self.gathers)
            + sum(
                coco.element_info(self.partial_type(op)).bytes
                for op in self.slice_reductions
            )
        )


@dataclass(frozen=True)
class SymmetricBuffer:
    """One buffer of a fused kernel in the symmetric workspace: what it holds
    (`kind`) for which op, and its size."""

    kind: str
    op: Operation
    element_type: Attribute
    count: int

    @property
    def bytes(self) -> int:
        return self.count * coco.element_info(self.element_type).bytes


def _operand_type(op: Operation) -> Attribute:
    return coco.tensor_type(op.operands[0]).element_type


def _result_type(op: Operation) -> Attribute:
    return coco.tensor_type(op.results[0]).element_type


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def is_row_reduction(op: coco.ReduceOp) -> bool:
    """A keep-dims reduction of a sliced value over its dims after some dim
    past the cut, of more than one element each: one value per row, sliced
    like its operand (a norm's statistics)."""
    t = coco.tensor_type(op.operand)
    if not (op.keeps_dims and t.layout.is_sliced):
        return False
    reduced = list(op.reduced_dims)
    first = reduced[0] if reduced else t.rank
    return (
        first > t.layout.sliced_dim
        and reduced == list(range(first, t.rank))
        and prod(t.dims[first:]) > 1
    )


def _row_length(
    t: coco.TensorType, dims: tuple[int, ...], dim: int
) -> int | None:
    """The row length `R` if `t` holds one value per row of a slice of shape
    `dims` cut along `dim`: sliced like it, its dims but 1 from some dim
    after the cut on (that dim's and the later dims' product is `R` > 1)."""
    if not (t.layout.is_sliced and t.layout.sliced_dim == dim and t.rank == len(dims)):
        return None
    first = next(
        (k for k in range(dim + 1, t.rank) if all(d == 1 for d in t.dims[k:])),
        None,
    )
    if first is None or tuple(t.dims[:first]) != dims[:first]:
        return None
    length = prod(dims[first:])
    return length if length > 1 else None


def _has_rows(ops: list[Operation], slice_types: list[coco.TensorType]) -> bool:
    """Whether `ops` reduce rows or read rows of any of the parts' slices
    (a value of a part's own shape is that part's slice, not rows)."""
    shapes = {(tuple(t.dims), t.layout.sliced_dim) for t in slice_types}
    if any(isinstance(op, coco.ReduceOp) and op.keeps_dims for op in ops):
        return True
    for op in ops:
        for value in (*op.operands, *op.results):
            t = value.type
            if not isinstance(t, coco.TensorType) or not t.layout.is_sliced:
                continue
            if (tuple(t.dims), t.layout.sliced_dim) in shapes:
                continue
            if any(_row_length(t, dims, dim) for dims, dim in shapes):
                return True
    return False


def _row_lengths(ops: list[Operation], slice_type: coco.TensorType) -> set[int]:
    """The row lengths of the values `ops` read and compute."""
    dims, dim = tuple(slice_type.dims), slice_type.layout.sliced_dim
    return {
        length
        for op in ops
        for value in (*op.operands, *op.results)
        if isinstance(value.type, coco.TensorType)
        and (length := _row_length(value.type, dims, dim)) is not None
    }


def _problems(
    ops: list[Operation], slice_types: list[coco.TensorType], row_length: int
) -> list[str]:
    """Why `ops` are not a fused collective over slices of `slice_types` (one
    per part; with rows of `row_length` elements, of the one part)."""
    problems: list[str] = []
    shapes = [(tuple(t.dims), t.layout.sliced_dim) for t in slice_types]
    dims, dim = shapes[0]
    named = " or ".join(str(t) for t in slice_types)

    def shape_of(t: coco.TensorType) -> tuple[tuple[int, ...], int] | None:
        """The part `t` is a slice of, if it is one."""
        key = (tuple(t.dims), t.layout.sliced_dim if t.layout.is_sliced else -1)
        return key if t.layout.is_sliced and key in shapes else None

    def is_slice(t: coco.TensorType) -> bool:
        return shape_of(t) is not None

    def is_rows(t: coco.TensorType) -> bool:
        return row_length > 1 and _row_length(t, dims, dim) == row_length

    def is_scalar(t: coco.TensorType) -> bool:
        return t.rank == 0 and t.layout.is_replicated

    def broadcasts(t: coco.TensorType, against: tuple[int, ...] | None = None) -> bool:
        """Whether replicated `t` broadcasts against the part `against` (any
        part when None)."""
        if not t.layout.is_replicated:
            return False
        for target in [against] if against is not None else [d for d, _ in shapes]:
            if t.rank <= len(target) and all(
                a in (1, b) for a, b in zip(t.dims, target[len(target) - t.rank :])
            ):
                return True
        return False

    computed_broadcasts: set[SSAValue] = set()
    """Arithmetic on replicated inputs that broadcast (`convert %weight`):
    computed again at every element, from the inputs read there."""

    def reads_broadcast(v: SSAValue, against: tuple[int, ...] | None = None) -> bool:
        t = coco.tensor_type(v)
        return broadcasts(t, against) and (
            isinstance(v, BlockArgument) or v in computed_broadcasts or is_scalar(t)
        )

    for op in ops:
        if isinstance(op, coco.ReduceScatterOp):
            t = coco.tensor_type(op.result)
            if not isinstance(op.operand, BlockArgument):
                problems.append("reduces a value computed inside the fusion")
            kind = t.element_type
            if kind == coco.i1:
                problems.append(f"reduces {t.element_type} values")
            continue
        if isinstance(op, coco.AllGatherOp):
            if not is_slice(coco.tensor_type(op.operand)):
                problems.append(f"gathers {op.operand.type}, not a slice {named}")
            continue
        if isinstance(op, coco.SendOp):
            continue
        if isinstance(op, coco.ReduceOp) and op.keeps_dims:
            problems.extend(_row_reduction_problems(op, is_slice))
            continue
        if isinstance(op, coco.ReduceOp):
            problems.extend(_slice_reduction_problems(op, is_slice))
            continue
        if isinstance(op, coco.AllReduceOp):
            if not isinstance(op.operand.owner, coco.ReduceOp):
                problems.append(
                    "all-reduces a value that is not the partial of a "
                    "coco.reduce in the fusion"
                )
            continue
        if isinstance(op, coco.AllSliceOp):
            t = coco.tensor_type(op.result)
            if not is_slice(t):
                problems.append(f"cuts {t}, not the fusion's slice {named}")
            continue
        if isinstance(op, coco.ConstantOp):
            continue
        if not isinstance(op, coco.ELEMENTWISE_OPS):
            problems.append(f"holds {op.name}, which the fused kernel does not compute")
            continue
        t = coco.tensor_type(op.results[0])
        if is_rows(t):
            problems.extend(_row_op_problems(op, is_rows, is_scalar))
            continue
        if (
            t.rank > 0
            and broadcasts(t)
            and all(reads_broadcast(v) for v in op.operands)
        ):
            if isinstance(op, coco.DropoutOp):
                problems.append(f"drops out {t}, not elements of the slice")
            computed_broadcasts.add(op.results[0])
            continue
        part = shape_of(t)
        if not (part is not None or is_scalar(t)):
            problems.append(f"computes {t}, neither a slice {named} nor a scalar")
            continue
        for operand in op.operands:
            u = coco.tensor_type(operand)
            if part is None and not is_scalar(u):
                problems.append(f"computes the scalar {t} from {u}")
            elif part is not None and is_slice(u) and shape_of(u) != part:
                problems.append(f"computes {t} from a slice of another shape, {u}")
            elif not (
                is_slice(u)
                or is_rows(u)
                or reads_broadcast(operand, None if part is None else part[0])
            ):
                problems.append(
                    f"computes on {u}, which the kernel cannot read per element"
                )
    return problems


def _row_reduction_problems(op: coco.ReduceOp, is_slice) -> list[str]:
    """A row reduction must reduce a slice of the fusion's shape over its
    dims after the cut, into rows that elementwise ops read."""
    t = coco.tensor_type(op.operand)
    if not (is_slice(t) and is_row_reduction(op)):
        return [
            f"holds a 'coco.reduce ... keep_dims' of {t} over dims "
            f"{list(op.reduced_dims)}, not of rows after the cut (its last dims)"
        ]
    if t.element_type == coco.i1:
        return [f"holds a 'coco.reduce' of {t.element_type} values"]
    for use in op.result.uses:
        if not isinstance(use.operation, (*coco.ELEMENTWISE_OPS, coco.YieldOp)):
            return [
                f"uses the rows of 'coco.reduce' in '{use.operation.name}', "
                "not only in elementwise ops"
            ]
    return []


def _row_op_problems(op: Operation, is_rows, is_scalar) -> list[str]:
    """Arithmetic on rows (computed again for every element of a row) reads
    rows and scalars; a dropout of rows draws at no element's index."""
    if isinstance(op, coco.DropoutOp):
        return [f"drops out rows {op.results[0].type}, not elements of the slice"]
    for operand in op.operands:
        t = coco.tensor_type(operand)
        if not (is_rows(t) or is_scalar(t)):
            return [f"computes rows {op.results[0].type} from {t}"]
    return []


def _slice_reduction_problems(op: coco.ReduceOp, is_slice) -> list[str]:
    """A slice reduction must reduce a whole slice of the fusion's shape to a
    rank-0 partial that only all_reduces in the body read."""
    t = coco.tensor_type(op.operand)
    if not is_slice(t) or len(op.reduced_dims) != t.rank:
        return [
            f"holds a 'coco.reduce' of {t} over dims {list(op.reduced_dims)}, "
            "not of a whole slice"
        ]
    if t.element_type == coco.i1:
        return [f"holds a 'coco.reduce' of {t.element_type} values"]
    for use in op.result.uses:
        if not isinstance(use.operation, coco.AllReduceOp):
            return [
                f"uses the partial of 'coco.reduce' in '{use.operation.name}', "
                "not only in coco.all_reduce"
            ]
    return []


def _yield_problems(fusion: coco.FusionOp, slice_type: coco.TensorType) -> list[str]:
    """The kernel writes slices (or rows of them) computed in the body and
    gathered values; a yielded input or scalar has no element the kernel
    would store."""
    problems: list[str] = []
    for value in fusion.yield_op.arguments:
        t = coco.tensor_type(value)
        if isinstance(value, BlockArgument):
            problems.append("yields one of its inputs unchanged")
        elif not (t.layout.is_sliced or isinstance(value.owner, coco.AllGatherOp)):
            problems.append(f"yields {t}, neither a slice nor a gathered value")
    return problems


def fused_plans(module: ModuleOp, world: int) -> dict[coco.FusionOp, FusedPlan | str]:
    """The plan (or the refusal) of every `coco.fusion` with a reduce_scatter
    in `module`."""
    return {
        op: FusedPlan.of(op, world)
        for op in module.walk()
        if isinstance(op, coco.FusionOp)
        and any(isinstance(o, coco.ReduceScatterOp) for o in op.block.ops)
    }
