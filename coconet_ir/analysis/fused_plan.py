"""The shape of a fused collective: what one fused kernel computes for a
`coco.fusion` holding reduce_scatters (docs/gpu.md, "The fused all-reduce
kernel").

A fusion the kernel handles is, in body order:

- one or more `coco.reduce_scatter`s of fusion inputs (`local`, global shape
  `G`) along the same dim `D`, all with results of type `G` sliced along `D`
  (the *slice*: every rank owns `prod(G) / N` elements of it);
- elementwise ops and `coco.all_slice`s whose tensor results are slices of
  that same shape and dim (rank-0 replicated scalars are allowed too);
- `coco.all_gather`s of slices, and `coco.send`s of slices or gathered values;
- the yield, of slices and gathered values.

Every other operand comes from the fusion's inputs: a slice of the same type,
or a replicated tensor that broadcasts against `G` (it is read at each
element's global index). `FusedPlan.of` returns the plan, or a sentence saying
why the fusion is not of this shape; the lowering then falls back to lowering
the body op by op.

The per-element computation is done once per element of the rank's slice, at
the element's global coordinates, so the sliced dim needs no packing: a slice
of a tensor cut along an inner dim (Megatron's `sliced<1>`) is addressed, not
copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue

from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    AllGatherOp,
    AllSliceOp,
    ConstantOp,
    FusionOp,
    ReduceScatterOp,
    SendOp,
    TensorType,
    YieldOp,
    element_info,
)

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
class SymmetricLayout:
    """Where a fusion's symmetric buffers lie in its part of the workspace."""

    offsets: dict[Operation, int] = field(default_factory=dict[Operation, int])
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
class FusedPlan:
    """What a fused collective kernel does for one `coco.fusion`."""

    fusion: FusionOp
    geometry: SliceGeometry
    reductions: tuple[ReduceScatterOp, ...]
    compute: tuple[Operation, ...]
    """Elementwise ops, all_slices and constants, in body order."""
    gathers: tuple[AllGatherOp, ...]
    sends: tuple[SendOp, ...]
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS

    # ------------------------------------------------------------------
    # Construction
    # ------------------------------------------------------------------

    @staticmethod
    def of(
        fusion: FusionOp, world: int, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
    ) -> FusedPlan | str:
        """The plan of `fusion` on `world` ranks, or why the fused kernel does
        not handle it."""
        ops = [op for op in fusion.block.ops if not isinstance(op, YieldOp)]
        reductions = [op for op in ops if isinstance(op, ReduceScatterOp)]
        if not reductions:
            return "holds no coco.reduce_scatter"
        if chunk_elements < 1:
            return f"chunk size must be >= 1 element, got {chunk_elements}"
        slice_type = coco.tensor_type(reductions[0].result)
        dim = slice_type.layout.sliced_dim
        if slice_type.rank == 0 or slice_type.dims[dim] % world:
            return f"cannot cut {slice_type} into {world} blocks"
        geometry = SliceGeometry(tuple(slice_type.dims), dim, world)
        problems = _problems(ops, slice_type) + _yield_problems(fusion)
        if problems:
            return problems[0]
        return FusedPlan(
            fusion,
            geometry,
            tuple(reductions),
            tuple(
                op
                for op in ops
                if isinstance(op, (*ELEMENTWISE_OPS, AllSliceOp, ConstantOp))
            ),
            tuple(op for op in ops if isinstance(op, AllGatherOp)),
            tuple(op for op in ops if isinstance(op, SendOp)),
            chunk_elements,
        )

    # ------------------------------------------------------------------
    # Derived facts
    # ------------------------------------------------------------------

    @property
    def world(self) -> int:
        return self.geometry.world

    @property
    def chunks(self) -> int:
        """Chunks of a rank's slice (the last one may be short)."""
        return -(-self.geometry.elements // self.chunk_elements)

    @property
    def chunk_size(self) -> int:
        """Elements of a full chunk (never more than the slice)."""
        return min(self.chunk_elements, self.geometry.elements)

    @property
    def signal_slots(self) -> int:
        """Signal-pad slots the kernel uses: phase x source rank x chunk."""
        return SIGNAL_PHASES * self.world * self.chunks

    def reduction_element_bytes(self, op: ReduceScatterOp) -> int:
        return element_info(coco.tensor_type(op.operand).element_type).bytes

    def gather_element_bytes(self, op: AllGatherOp) -> int:
        return element_info(coco.tensor_type(op.operand).element_type).bytes

    def symmetric_layout(self, alignment: int = SYMMETRIC_ALIGNMENT) -> SymmetricLayout:
        """Byte offsets (from the fusion's base) of each reduction's scratch
        and each gather's receive buffer, each `world * slice` elements."""
        offsets: dict[Operation, int] = {}
        total = 0
        for op in self.reductions:
            offsets[op] = total
            total += _align(
                self.world * self.geometry.elements * self.reduction_element_bytes(op),
                alignment,
            )
        for op in self.gathers:
            offsets[op] = total
            total += _align(
                self.world * self.geometry.elements * self.gather_element_bytes(op),
                alignment,
            )
        return SymmetricLayout(offsets, total)

    def peer_bytes(self) -> int:
        """Bytes this rank stores into each other rank per launch: its
        contribution to the peer's slice of every reduction (phase 1), and its
        slice of every gathered value (phase 2)."""
        elements = self.geometry.elements
        return sum(
            elements * self.reduction_element_bytes(op) for op in self.reductions
        ) + sum(elements * self.gather_element_bytes(op) for op in self.gathers)


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def _problems(ops: list[Operation], slice_type: TensorType) -> list[str]:
    """Why `ops` are not a fused collective over slices of `slice_type`."""
    problems: list[str] = []
    dims = tuple(slice_type.dims)
    dim = slice_type.layout.sliced_dim

    def is_slice(t: TensorType) -> bool:
        return (
            t.layout.is_sliced and tuple(t.dims) == dims and t.layout.sliced_dim == dim
        )

    def is_scalar(t: TensorType) -> bool:
        return t.rank == 0 and t.layout.is_replicated

    def broadcasts(t: TensorType) -> bool:
        if not t.layout.is_replicated or t.rank > len(dims):
            return False
        tail = dims[len(dims) - t.rank :]
        return all(a in (1, b) for a, b in zip(t.dims, tail))

    for op in ops:
        if isinstance(op, ReduceScatterOp):
            t = coco.tensor_type(op.result)
            if not is_slice(t):
                problems.append(
                    f"reduces into {t}, not the fusion's slice {slice_type}"
                )
            if not isinstance(op.operand, BlockArgument):
                problems.append("reduces a value computed inside the fusion")
            kind = t.element_type
            if kind == coco.i1:
                problems.append(f"reduces {t.element_type} values")
            continue
        if isinstance(op, AllGatherOp):
            if not is_slice(coco.tensor_type(op.operand)):
                problems.append(f"gathers {op.operand.type}, not a slice {slice_type}")
            continue
        if isinstance(op, SendOp):
            continue
        if isinstance(op, AllSliceOp):
            t = coco.tensor_type(op.result)
            if not is_slice(t):
                problems.append(f"cuts {t}, not the fusion's slice {slice_type}")
            continue
        if isinstance(op, ConstantOp):
            continue
        if not isinstance(op, ELEMENTWISE_OPS):
            problems.append(f"holds {op.name}, which the fused kernel does not compute")
            continue
        t = coco.tensor_type(op.results[0])
        if not (is_slice(t) or is_scalar(t)):
            problems.append(f"computes {t}, neither a slice {slice_type} nor a scalar")
        for operand in op.operands:
            problems.extend(_operand_problem(operand, is_slice, is_scalar, broadcasts))
    return problems


def _yield_problems(fusion: FusionOp) -> list[str]:
    """The kernel writes slices computed in the body and gathered values; a
    yielded input or scalar has no element the kernel would store."""
    problems: list[str] = []
    for value in fusion.yield_op.arguments:
        t = coco.tensor_type(value)
        if isinstance(value, BlockArgument):
            problems.append("yields one of its inputs unchanged")
        elif not (t.layout.is_sliced or isinstance(value.owner, AllGatherOp)):
            problems.append(f"yields {t}, neither a slice nor a gathered value")
    return problems


def _operand_problem(operand: SSAValue, is_slice, is_scalar, broadcasts) -> list[str]:
    t = coco.tensor_type(operand)
    if is_slice(t) or is_scalar(t):
        return []
    if isinstance(operand, BlockArgument) and broadcasts(t):
        return []
    return [f"computes on {t}, which the kernel cannot read per element"]


def fused_plans(module: ModuleOp, world: int) -> dict[FusionOp, FusedPlan | str]:
    """The plan (or the refusal) of every `coco.fusion` with a reduce_scatter
    in `module`."""
    return {
        op: FusedPlan.of(op, world)
        for op in module.walk()
        if isinstance(op, FusionOp)
        and any(isinstance(o, ReduceScatterOp) for o in op.block.ops)
    }
