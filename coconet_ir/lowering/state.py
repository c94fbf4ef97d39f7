"""The state of one convert-coco-to-gpu conversion and the helpers its
patterns and region lowerings share (docs/gpu/device.md).

`Lowering` holds what the patterns of one conversion share: the world size,
the launch width, the kernel module, where each value's buffer must be
(`result_buffer` writes in place when it may), the host values of each
function, and how a kernel over a domain indexes its operands (`plan`,
`map_kernel`; `ElementContext.element_index`, `global_index`). `replace_with_buffers`
replaces a coco op by host ops, its results by casts of their buffers;
`chunk_of` reads where a dropout cloned into an overlap chunk or a per-peer
step sits (`CHUNK_ATTR`).

The pass and its patterns are in `coconet_ir.lowering.coco_to_gpu`; the
region lowerings (`fused_collectives`, `tile_collectives`, `overlap`,
`per_peer`) build on this module, never on the pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IndexType,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from coconet_ir.analysis.fused_plan import DEFAULT_CHUNK_ELEMENTS
from coconet_ir.costmodel.formulas import flat_all_reduce_s, hierarchical_all_reduce_s
from coconet_ir.costmodel.machines import Machine
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import (
    coco,
    gpu,  # xDSL's gpu, in MLIR's syntax
)
from coconet_ir.dialects.coco import TensorType, enclosing_function, label_of
from coconet_ir.lowering.bufferize import (
    alloc,
    as_tensor,
    buffer_of,
    element_count,
    local_shape,
)
from coconet_ir.lowering.host import HostValues
from coconet_ir.lowering.kernels import (
    Indexer,
    KernelModule,
    KernelSite,
    as_i64,
    flat_args,
    grid_stride_loop,
    index_constant,
    launch,
    linear,
    printed_form,
)

__all__ = [
    "CHUNK_ATTR",
    "Axis",
    "ChunkAt",
    "ElementContext",
    "Lowering",
    "chunk_of",
    "needs_rank_for_dropout",
    "replace_with_buffers",
    "result_type",
    "tensor_of",
]

index = IndexType()

CONVERSION = "convert-coco-to-gpu"
"""The conversion's pass name (its remarks' category)."""

CHUNK_ATTR = "coco_gpu.chunk"
"""On a dropout cloned into one chunk of a `coco.overlap` or one step of a
`coco.per_peer` (while lowering): `array<i64: DIM, INDEX, CHUNKS>` — its
operand is chunk INDEX of CHUNKS along DIM of the un-chunked value — or
`array<i64: DIM, STEP, CHUNKS, 1>` — chunk `(rank + STEP) mod CHUNKS`, known
only at run time —, so that its global index is kept."""


@dataclass(frozen=True)
class ChunkAt:
    """Where the chunk a cloned dropout runs on sits (`CHUNK_ATTR`): chunk
    `index` of `chunks` along `dim`, or with `rotating`, chunk `(rank + index)
    mod chunks` (step `index` of a per-peer region)."""

    dim: int
    index: int
    chunks: int
    rotating: bool = False

    def attribute(self) -> DenseArrayBase:
        values = [self.dim, self.index, self.chunks] + [1] * self.rotating
        return DenseArrayBase.from_list(i64, values)


# ============================================================================
# The state of one conversion
# ============================================================================


@dataclass(frozen=True)
class Axis:
    """How one axis of a value's buffer is indexed from a kernel's domain: the
    domain digit `digit` (None: always 0) plus `rank * rank_stride`."""

    digit: int | None
    rank_stride: int = 0


PEER_MEMORY_OPS = (
    coco.AllReduceOp,
    coco.ReduceScatterOp,
    coco.AllGatherOp,
    coco.AllToAllOp,
    coco.BroadcastOp,
)
"""The collectives whose fusion (a `coco.fusion` holding one) is a kernel that
stores into its peers' memory."""


@dataclass(frozen=True)
class Nodes:
    """How a stage's ranks sit on nodes (docs/gpu/device.md, "Several nodes"):
    `ranks_per_node` to a node, rank `r` on node `r // ranks_per_node` (0: all
    on one). Peer memory exists inside a node only; `machine`'s cost model
    chooses each all-reduce's form."""

    ranks_per_node: int
    machine: Machine | None = None

    def several(self, world: int) -> bool:
        return 0 < self.ranks_per_node < world

    def hierarchical(self, nbytes: int, count: int, world: int) -> bool:
        """Whether an all-reduce of `count` elements (`nbytes`) is lowered
        as reduce-scatter in the node, all-reduce across, all-gather in the
        node: on several nodes, when `count` splits into the node's ranks
        and the cost model predicts it faster than one ring over them all."""
        g = self.ranks_per_node
        if not self.several(world) or count % g or self.machine is None:
            return False
        return hierarchical_all_reduce_s(
            nbytes, world, g, self.machine
        ) < flat_all_reduce_s(nbytes, world, g, self.machine)

    def problem(self, op: Operation, world: int) -> str | None:
        """Why `op` cannot run with the stage on several nodes: its lowering
        stores into peers' memory, which a rank on another node does not
        share (nothing pretends such a pointer exists); or None."""
        where = (
            f"with ranks_per_node={self.ranks_per_node} the {world} ranks are on "
            f"{world // self.ranks_per_node} nodes, and a rank cannot reach another "
            "node's memory"
        )
        if isinstance(op, coco.PerPeerOp):
            return f"'coco.per_peer' copies into its peers' memory; {where}"
        if isinstance(op, coco.ShiftOp) and not (
            tensor_of(op.operand).layout.is_replicated or op.offset % world == 0
        ):
            return f"'coco.shift' copies into a peer's memory; {where}"
        if isinstance(op, coco.FusionOp) and any(
            isinstance(inner, PEER_MEMORY_OPS) for inner in op.walk()
        ):
            return (
                f"'coco.fusion' holds a collective: its kernel stores into every "
                f"rank's memory; {where}. Lower the program without the fused "
                "kernels (coco-optimize{fuse=false fuse_collective=false}, or "
                f"coco-optimize{{ranks_per_node={self.ranks_per_node} world={world}}})"
            )
        return None


@dataclass
class Lowering:
    """What the patterns of one conversion share: the world size, the launch
    width, the kernel module, and where each value's buffer must be."""

    world: int
    threads: int
    kernels: KernelModule
    fused_chunk: int = DEFAULT_CHUNK_ELEMENTS
    """Elements per chunk of a fused collective kernel's slice."""
    nodes: Nodes = field(default_factory=lambda: Nodes(0))
    """How the stage's ranks sit on nodes (one node unless told)."""
    destinations: dict[SSAValue, SSAValue] = field(
        default_factory=dict[SSAValue, SSAValue]
    )
    """coco value → the buffer its final value must be in (an updated
    parameter's or an out-parameter)."""
    out_params: dict[func.FuncOp, list[BlockArgument]] = field(
        default_factory=dict[func.FuncOp, list[BlockArgument]]
    )
    updates: dict[func.FuncOp, list[tuple[SSAValue, SSAValue]]] = field(
        default_factory=dict[func.FuncOp, list[tuple[SSAValue, SSAValue]]]
    )
    """The (value, parameter) buffer copies the updates of each function
    still need (emitted together by `finish_updates`)."""
    hosts: dict[func.FuncOp, HostValues] = field(
        default_factory=dict[func.FuncOp, HostValues]
    )

    def host(self, op: Operation) -> HostValues:
        """The shared host values (constants, the rank, grids, flat views) of
        the function `op` is in."""
        function = enclosing_function(op)
        assert function is not None
        found = self.hosts.get(function)
        if found is None:
            found = self.hosts[function] = HostValues(function.body.block, self.world)
        return found

    # -- buffers -------------------------------------------------------------

    def buffer(self, value: SSAValue) -> tuple[list[Operation], SSAValue]:
        """The buffer of the coco value `value` (see `buffer_of`)."""
        return buffer_of(value, self.world)

    def buffers(
        self, values: Sequence[SSAValue]
    ) -> tuple[list[Operation], list[SSAValue]]:
        ops: list[Operation] = []
        found: list[SSAValue] = []
        for value in values:
            more, buffer = self.buffer(value)
            ops += more
            found.append(buffer)
        return ops, found

    def result_buffers(self, op: Operation) -> tuple[list[Operation], list[SSAValue]]:
        """The host ops making the buffers of every result of `op`
        (`result_buffer`), and those buffers."""
        made = [self.result_buffer(op, result) for result in op.results]
        return [o for ops, _ in made for o in ops], [out for _, out in made]

    def operands_and_result(
        self, op: Operation, operands: Sequence[SSAValue], reads_in_place: bool = False
    ) -> tuple[list[Operation], list[SSAValue], SSAValue]:
        """The host ops making the buffers of `operands` and the buffer of
        `op`'s result (`result_buffer`), and those buffers."""
        host, buffers = self.buffers(operands)
        more, out = self.result_buffer(op, op.results[0], reads_in_place)
        return [*host, *more], buffers, out

    def result_buffer(
        self, producer: Operation, value: SSAValue, reads_in_place: bool = False
    ) -> tuple[list[Operation], SSAValue]:
        """The buffer `producer` writes `value` into: its destination when the
        producer may write there (the parameter's old value is dead by then;
        `reads_in_place`: the producer may itself read it, element by element
        at the index it writes), else a new `memref.alloc`."""
        destination = self.destinations.get(value)
        if destination is not None and self.may_overwrite(
            producer, destination, reads_in_place
        ):
            return [], destination
        assert isinstance(value.type, TensorType)
        made = alloc(value.type.element_type, local_shape(value.type, self.world))
        if value.name_hint:
            made.memref.name_hint = value.name_hint
        return [made], made.memref

    def may_overwrite(
        self, producer: Operation, buffer: SSAValue, reads_in_place: bool
    ) -> bool:
        """Whether nothing after `producer` (nor `producer` itself, unless it
        reads in place) reads the old contents of `buffer`."""
        function = enclosing_function(producer)
        if function is None:
            return False
        if any(buffer is arg for arg in self.out_params.get(function, [])):
            return True
        top = function.body.block
        here = top_level(producer, top)
        uses = list(buffer.uses)
        for use in list(buffer.uses):
            if isinstance(use.operation, UnrealizedConversionCastOp):
                uses += [u for r in use.operation.results for u in r.uses]
        for use in uses:
            reader = use.operation
            if isinstance(reader, UnrealizedConversionCastOp) or (
                isinstance(reader, coco.UpdateOp) and use.index == 0
            ):
                continue  # a cast, or the update of this very parameter
            if isinstance(reader, memref.CopyOp) and use.index == 1:
                continue  # a copy into the buffer does not read it
            where = top_level(reader, top)
            if follows(where, here) or (where is here and not reads_in_place):
                return False
        return True

    # -- kernels -------------------------------------------------------------

    def kernel_name(self, op: Operation, kind: str | None = None) -> str:
        """`<function>_<label or kind>` (KernelModule adds `_<n>`)."""
        label = label_of(op)
        if label is None:
            return self.kind_name(op, kind)
        return f"{self.function_prefix(op)}_{label}"

    def kernel_site(self, op: Operation, kind: str | None = None) -> KernelSite:
        """Where the kernel of `op` (`kernel_name`) is built and launched
        from."""
        return KernelSite(
            self.host(op), self.kernels, self.threads, self.kernel_name(op, kind)
        )

    def kind_name(self, op: Operation, kind: str | None = None) -> str:
        """`<function>_<kind>`: the name of a kernel that ops of different
        labels launch (`KernelModule.cached`)."""
        return f"{self.function_prefix(op)}_{kind or op.name.removeprefix('coco.')}"

    def shared_kernel(
        self,
        op: Operation,
        kind: str,
        build: Callable[[str], gpu.FuncOp],
        *key: Hashable,
    ) -> gpu.FuncOp:
        """The kernel of what `op` computes on its types (its `printed_form`
        without value names, seeds and labels; `key` what else the kernel
        depends on), built by `build(name)` the first time and launched again
        by every op computing the same: its seeds and signal slots are
        arguments. Named after `op`'s label, or `<function>_<kind>` once
        ops of different labels share it (`KernelModule.cached`)."""
        name, generic = self.kernel_name(op, kind), self.kind_name(op, kind)
        form = printed_form(op, names=False, seeds=False, labels=False)
        return self.kernels.cached(
            (generic, form, self.threads, *key), lambda: build(name), name, generic
        )

    @staticmethod
    def function_prefix(op: Operation) -> str:
        function = enclosing_function(op)
        return function.sym_name.data if function is not None else "kernel"

    def plan(self, value: TensorType, domain: TensorType) -> list[Axis]:
        """How each axis of a buffer of type `value` is indexed from a kernel
        over the elements of `domain` (broadcasting from the right; a
        replicated operand of a sliced domain is read at the rank's block)."""
        values, domains = (
            local_shape(value, self.world),
            local_shape(domain, self.world),
        )
        pad = len(domains) - len(values)
        axes: list[Axis] = []
        for a, size in enumerate(values):
            j = a + pad
            if size == 1:
                axes.append(Axis(None))
            elif size == domains[j]:
                axes.append(Axis(j))
            elif size == domains[j] * self.world:
                axes.append(Axis(j, domains[j]))
            else:
                raise CocoError(f"cannot index {value} from a kernel over {domain}")
        return axes

    def needs_rank(self, value: TensorType, domain: TensorType) -> bool:
        return any(axis.rank_stride for axis in self.plan(value, domain))

    def is_identity(self, value: TensorType, domain: TensorType) -> bool:
        """Whether a buffer of `value` is indexed by the domain's flat index."""
        return local_shape(value, self.world) == local_shape(domain, self.world)

    @staticmethod
    def chunk_start(
        b: Builder,
        chunk: ChunkAt,
        size: int,
        digit: SSAValue | int,
        rank: SSAValue | None,
    ) -> SSAValue | int:
        """`digit` moved to its chunk's place along the chunk dim (`size`
        elements a chunk): `+ index * size`, or `+ ((rank + index) mod
        chunks) * size` for a per-peer step."""
        if not chunk.rotating:
            start = chunk.index * size
            if isinstance(digit, int):
                return digit + start
            if not start:
                return digit
            return b.insert(arith.AddiOp(digit, index_constant(b, start))).result
        assert rank is not None
        c = b.insert(arith.AddiOp(rank, index_constant(b, chunk.index))).result
        c = b.insert(arith.RemUIOp(c, index_constant(b, chunk.chunks))).result
        start = b.insert(arith.MuliOp(c, index_constant(b, size))).result
        if isinstance(digit, int) and not digit:
            return start
        base = index_constant(b, digit) if isinstance(digit, int) else digit
        return b.insert(arith.AddiOp(base, start)).result

    def map_kernel(
        self,
        host: HostValues,
        name: str,
        domain: TensorType,
        inputs: Sequence[tuple[SSAValue, TensorType]],
        outputs: Sequence[tuple[SSAValue, TensorType]],
        body: Callable[
            [Builder, Callable[[int], SSAValue], ElementContext], list[SSAValue]
        ],
        needs_rank: bool = False,
        dropouts: Sequence[coco.DropoutOp] = (),
        form: Hashable | None = None,
        generic: str | None = None,
    ) -> list[Operation]:
        """Host ops launching a grid-stride kernel over the elements of
        `domain`: input `k` (a buffer and its coco type) is loaded when `body`
        asks for it (`load(k)`, at the element its broadcast reads), `body`
        computes the outputs' scalars, stored at each output's element.

        The seeds of `dropouts` (the body's) are i64 kernel arguments, so
        that `form` — what `body` computes, seeds left out (`printed_form`) —
        names the kernel: a kernel already built for the same form and types
        is launched again rather than built anew (every layer of a model).
        With `generic`, the name of the computation's kind, `form` leaves the
        ops' labels out: ops of different labels share the kernel, which
        is then named `generic` (`KernelModule.cached`)."""
        needs_rank = needs_rank or any(
            self.needs_rank(t, domain) for _, t in (*inputs, *outputs)
        )
        args: list[SSAValue] = []
        arg_specs: list[tuple[str, Attribute]] = [("n", index)]
        if needs_rank:
            args.append(host.rank())
            arg_specs.append(("rank", index))
        for dropout in dropouts:
            args.append(host.integer(dropout.seed.value.data, i64))
            arg_specs.append(("seed", i64))
        buffers = [buffer for buffer, _ in (*inputs, *outputs)]
        views, flats = flat_args(host, buffers)
        args += flats
        for k, (buffer, flat) in enumerate(zip(buffers, flats)):
            hint = buffer.name_hint or ("in" if k < len(inputs) else "out")
            arg_specs.append((hint, flat.type))

        def build() -> gpu.FuncOp:
            kernel, b = self.kernels.kernel(name, arg_specs)
            kernel_args = list(kernel.body.block.args)
            rank = kernel_args[1] if needs_rank else None
            seeds = kernel_args[1 + needs_rank :][: len(dropouts)]
            buffers = kernel_args[1 + needs_rank + len(dropouts) :]
            loop, i = grid_stride_loop(b, kernel_args[0])
            indexer = Indexer(loop, i, local_shape(domain, self.world))
            loaded: dict[int, SSAValue] = {}
            context = ElementContext(
                self, loop, indexer, domain, rank, dict(zip(dropouts, seeds))
            )

            def load(k: int) -> SSAValue:
                if k not in loaded:
                    at = context.element_index(inputs[k][1])
                    loaded[k] = loop.insert(
                        memref.LoadOp.get(buffers[k], [] if at is None else [at])
                    ).res
                return loaded[k]

            results = body(loop, load, context)
            for (_, t), result, buffer in zip(outputs, results, buffers[len(inputs) :]):
                at = context.element_index(t)
                loop.insert(
                    memref.StoreOp.get(result, buffer, [] if at is None else [at])
                )
            return kernel

        if form is None:
            kernel = build()
        else:
            key = (
                generic or name,
                form,
                domain,
                tuple(t for _, t in arg_specs),
                tuple(t for _, t in (*inputs, *outputs)),
            )
            kernel = self.kernels.cached(key, build, name, generic)
        count = element_count(domain, self.world)
        return [*views, *launch(host, self.kernels, kernel, count, args, self.threads)]


@dataclass
class ElementContext:
    """Where a map kernel's body is: what indexing an operand's buffer
    (`element_index`) or a dropout's global index (`global_index`) needs."""

    lowering: Lowering
    b: Builder
    indexer: Indexer
    domain: TensorType
    rank: SSAValue | None
    seeds: dict[coco.DropoutOp, SSAValue] = field(
        default_factory=dict[coco.DropoutOp, SSAValue]
    )
    """The kernel's seed argument of each of the body's dropouts."""

    def global_index(self, value: TensorType, chunk: ChunkAt | None = None) -> SSAValue:
        """The global linear index (an i64) of the element of `value` the
        domain's element `indexer.flat` reads: its block offset when sliced,
        its chunk offset inside an overlap chunk or a per-peer step."""
        b, indexer, domain, rank = self.b, self.indexer, self.domain, self.rank
        lowering = self.lowering
        shape = local_shape(value, lowering.world)
        whole = list(value.dims)  # the value a chunk is cut from
        if chunk is not None:
            whole[chunk.dim] *= chunk.chunks
        start = self.block_start(value, shape, whole, chunk)
        if start is not None:
            flat = indexer.flat
            if not (isinstance(start, int) and start == 0):
                offset = index_constant(b, start) if isinstance(start, int) else start
                flat = b.insert(arith.AddiOp(flat, offset)).result
            return as_i64(b, flat)
        global_shape = list(value.dims)
        digits: list[SSAValue | int] = []
        plan = lowering.plan(value, domain)
        for a, axis in enumerate(plan):
            digit: SSAValue | int = (
                0 if axis.digit is None else indexer.digit(axis.digit)
            )
            sliced_here = value.layout.is_sliced and value.layout.sliced_dim == a
            if axis.rank_stride or sliced_here:
                # a replicated value read at the domain's block, or the rank's
                # own block of a sliced value
                assert rank is not None
                block = axis.rank_stride or shape[a]
                offset = b.insert(arith.MuliOp(rank, index_constant(b, block)))
                digit = (
                    offset.result
                    if isinstance(digit, int)
                    else b.insert(arith.AddiOp(digit, offset.result)).result
                )
            if chunk is not None and chunk.dim == a:
                global_shape[a] *= chunk.chunks
                digit = lowering.chunk_start(b, chunk, value.dims[a], digit, rank)
            digits.append(digit)
        return as_i64(b, linear(b, digits, global_shape))

    def block_start(
        self,
        value: TensorType,
        shape: Sequence[int],
        global_shape: Sequence[int],
        chunk: ChunkAt | None,
    ) -> SSAValue | int | None:
        """The global linear index of the first element of the domain's block
        when the block is one contiguous run of the global value (read at the
        domain's own flat index; every dim before the first one the block
        cuts is 1 in the block, every dim after it whole): the global index
        is then `flat + start`, no digit needed. Else None."""
        if not self.lowering.is_identity(value, self.domain):
            return None
        cut = [a for a, (n, g) in enumerate(zip(shape, global_shape)) if n != g]
        if not cut:
            return 0
        k = cut[0]
        if len(cut) > 1 or math.prod(shape[:k]) != 1:
            return None
        if chunk is not None and chunk.dim != k:
            return None
        b, stride = self.b, math.prod(global_shape[k + 1 :])
        sliced = value.layout.is_sliced and value.layout.sliced_dim == k
        if sliced and chunk is None:  # the rank's block: rank * its size
            assert self.rank is not None
            size = index_constant(b, shape[k] * stride)
            return b.insert(arith.MuliOp(self.rank, size)).result
        offset: SSAValue | int = 0
        if sliced:
            assert self.rank is not None
            size = index_constant(b, shape[k])
            offset = b.insert(arith.MuliOp(self.rank, size)).result
        if chunk is not None:
            offset = self.lowering.chunk_start(
                b, chunk, value.dims[k], offset, self.rank
            )
        if isinstance(offset, int) or stride == 1:
            return offset * stride if isinstance(offset, int) else offset
        return b.insert(arith.MuliOp(offset, index_constant(b, stride))).result

    def element_index(self, value: TensorType) -> SSAValue | None:
        """The flat index into a buffer of `value` of the domain's element
        `indexer.flat` (None for a rank-0 buffer)."""
        b, indexer, domain, rank = self.b, self.indexer, self.domain, self.rank
        lowering = self.lowering
        if value.rank == 0:
            return None
        if lowering.is_identity(value, domain):
            return indexer.flat
        digits: list[SSAValue | int] = []
        for axis in lowering.plan(value, domain):
            if axis.digit is None:
                digits.append(0)
                continue
            digit = indexer.digit(axis.digit)
            if axis.rank_stride:
                assert rank is not None
                offset = b.insert(
                    arith.MuliOp(rank, index_constant(b, axis.rank_stride))
                ).result
                digit = b.insert(arith.AddiOp(digit, offset)).result
            digits.append(digit)
        return linear(b, digits, local_shape(value, lowering.world))

    def seed(self, op: coco.DropoutOp) -> SSAValue:
        return self.seeds[op]


def chunk_of(op: Operation) -> ChunkAt | None:
    """The `coco_gpu.chunk` frame of a dropout cloned into an overlap chunk
    or a per-peer step."""
    attr = op.attributes.get(CHUNK_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return None
    dim, chunk, chunks, *rotating = (int(v) for v in attr.get_values())
    return ChunkAt(dim, chunk, chunks, bool(rotating and rotating[0]))


def needs_rank_for_dropout(op: Operation) -> bool:
    """A dropout of a sliced value, or in a per-peer step, needs the rank for
    its global index."""
    if not isinstance(op, coco.DropoutOp):
        return False
    chunk = chunk_of(op)
    return tensor_of(op.result).layout.is_sliced or (
        chunk is not None and chunk.rotating
    )


def follows(op: Operation, here: Operation) -> bool:
    """Whether `op` comes after `here` in their block. It steps from `here`
    both ways at once, so it costs the distance between them, not the length
    of the block (a function of many parameters asks it for each one)."""
    forward, backward = here.next_op, here.prev_op
    while forward is not None or backward is not None:
        if forward is op:
            return True
        if backward is op:
            return False
        forward = None if forward is None else forward.next_op
        backward = None if backward is None else backward.prev_op
    return False


def top_level(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op`) directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


def tensor_of(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def result_type(op: Operation, index: int = 0) -> TensorType:
    t = op.results[index].type
    assert isinstance(t, TensorType)
    return t


def replace_with_buffers(
    rewriter: PatternRewriter,
    op: Operation,
    host: list[Operation],
    results: Sequence[SSAValue],
) -> None:
    """Replace `op` by the host ops; its results by (casts of) `results`."""
    casts = [as_tensor(buffer, r.type) for buffer, r in zip(results, op.results)]
    rewriter.replace(op, [*host, *casts], [c.results[0] for c in casts])
