"""coco-bucket: gradient bucketing — many parameters' all_reduces, and the
optimizer updates that follow them, run on flat buckets (PyTorch DDP's
gradient buckets, ZeRO's and FSDP's flat parameters).

A data-parallel step of `P` parameters issues `P` all_reduces and `P` copies
of the optimizer's elementwise chain; after coco-optimize each becomes one
fused kernel, so `P` kernel launches. This pass concatenates the parameters
into buckets (`coco.concat`, rank-major: docs/dialect.md, "Buckets"), runs one
all_reduce and one elementwise chain per bucket, and takes the pieces back
apart (`coco.split`) for the parameters' `coco.update`s. coco-optimize's
other passes then treat the flat bucket as they treat one parameter: one fused
kernel per bucket.

The *chain* of an all_reduce `%r` is the elementwise ops (not dropout, whose
mask depends on the element's index) connected to `%r` through values of
`%r`'s shape: forward from `%r` and backward to their operands (Adam's
`b1 * m` belongs to the chain of `m1 = b1*m + (1-b1)*g`). Its *leaves* are the
values of that shape it reads from outside (the parameter, the moments, the
local gradient); its rank-0 operands are *scalars* (`lr`, `1 - b1`); its
values are used only by the chain itself, by `coco.update`s and by *sum
terms*: whole sums added up with other parameters' (a global norm's squares,
`clip_grad_norm_`'s), which the bucket computes as one sum over the flat
bucket (docs/passes/coco-bucket.md, "Sums across parameters"). Two
parameters share a bucket in full when their chains are the same op sequence
on the same scalars (equal scalar computations count as the same), leaf for
leaf of the same element type and layout: the bucket concatenates each leaf,
all-reduces the concatenated gradients, runs the chain once on the flat
buckets, splits every updated value and updates each parameter with its
piece. A parameter whose chain is not elementwise (LAMB's per-layer norms), or
reads values of another shape (a broadcast bias), shares only its all_reduce
(DDP's case): `coco.concat` → `coco.all_reduce` → `coco.split` whose pieces
replace the all_reduces, when every piece's consumer comes after the last
gradient of the bucket.

Buckets are filled in program order, greedily, with parameters of the same
chain up to `bytes` bytes of gradients (a larger parameter is a bucket of its
own), as DDP's `bucket_cap_mb` (default 25 MiB). A bucket of one parameter is
left alone. A bucket's all_reduce is labelled `bucketN` (its fused kernel is
then `<function>_bucketN_rs_fused`); a rebuilt chain op keeps a label all its
copies share.

Preconditions, for an all_reduce (checked for the one named with `op=NAME`:
the named all_reduces are bucketed together): it sits directly in a function
body, its operand has rank >= 1, and its element count divides by the world
size (the option `world`, else `coco.world_size`, else every world size up to
8 as coco-split-all-reduce assumes): a bucket holds one block of every
parameter per rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from coconet_ir.analysis.costs import global_bytes
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    AddOp,
    AllReduceOp,
    ConcatOp,
    ConstantOp,
    DropoutOp,
    ReduceOp,
    SplitOp,
    TensorType,
    UpdateOp,
    label_of,
    tensor_type,
    world_size,
)
from coconet_ir.passes.base import AllReducePass, fused_location
from coconet_ir.passes.split_all_reduce import ASSUMED_WORLD

DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024
"""DDP's default `bucket_cap_mb` (25 MiB)."""

Ref = tuple[object, ...]
"""How a chain refers to a value, the same for every parameter of a bucket."""


def bucket_world(op: Operation, world: int | None) -> tuple[int, str]:
    """The world size a bucket must divide into, and how it is known."""
    if world is not None:
        return world, f"the world size {world}"
    known = world_size(op)
    if known is not None:
        return known, f"the world size {known} (coco.world_size)"
    return ASSUMED_WORLD, f"every world size up to {ASSUMED_WORLD}"


def reduce_problem(op: AllReduceOp, world: int | None) -> str | None:
    """Why the all_reduce `op` cannot join a bucket, or None."""
    if not isinstance(op.parent_op(), FuncOp):
        return "it is not directly in a function body"
    grad = tensor_type(op.operand)
    if grad.rank == 0:
        return "its operand is rank 0 (a bucket holds one block of it per rank)"
    size, which = bucket_world(op, world)
    count = prod(grad.dims)
    if count % size:
        return (
            f"its operand {grad} has {count} elements, not divisible by {which}: "
            "a bucket holds one block of every parameter per rank"
        )
    return None


# ============================================================================
# Chains
# ============================================================================


def is_chain_op(op: Operation) -> bool:
    return isinstance(op, ELEMENTWISE_OPS) and not isinstance(op, DropoutOp)


def is_whole_sum(op: Operation) -> bool:
    """A sum of a whole value into a rank-0 replicated scalar used by one
    `coco.add`."""
    if not isinstance(op, ReduceOp) or op.kind.data != "sum" or op.keeps_dims:
        return False
    operand = tensor_type(op.operand)
    result = tensor_type(op.result)
    return (
        len(op.reduced_dims) == operand.rank
        and result.layout.is_replicated
        and op.result.uses.get_length() == 1
        and isinstance(next(iter(op.result.uses)).operation, AddOp)
    )


def is_sum_term(op: Operation) -> bool:
    """A whole sum added up with another parameter's (`is_whole_sum`, in the
    same `coco.add` tree): a term of a sum across parameters (a global
    norm's squares, `clip_grad_norm_`'s). A parameter's own `sum(g*g) + eps`
    is no term: its chain shares only its all_reduce, as before."""
    return is_whole_sum(op) and _tree_sums(sum_root(op)) > 1  # type: ignore[arg-type]


def _tree_sums(root: SSAValue) -> int:
    """The whole sums among the leaves of the `coco.add` tree below `root`
    (`sum_root`'s tree, walked down)."""
    found, work = 0, [root]
    while work:
        value = work.pop()
        op = value.owner
        if isinstance(op, AddOp) and (value is root or value.uses.get_length() == 1):
            work += op.operands
        elif isinstance(op, Operation) and is_whole_sum(op):
            found += 1
    return found


def sum_root(term: ReduceOp) -> SSAValue:
    """The value the sum tree above `term` adds up: follow its `coco.add`s
    while each one's result is used by exactly one more `coco.add`."""
    value: SSAValue = term.result
    while value.uses.get_length() == 1:
        user = next(iter(value.uses)).operation
        if not isinstance(user, AddOp) or tensor_type(user.results[0]).rank:
            break
        value = user.results[0]
    return value


def bucket_layout_ok(t: TensorType) -> bool:
    return not t.layout.is_sliced or t.layout.sliced_dim == 0


@dataclass
class Chain:
    """One parameter's all_reduce and what can be bucketed with it."""

    reduce: AllReduceOp
    ops: list[Operation] = field(default_factory=list[Operation])
    """The chain's elementwise ops, in program order."""
    leaves: list[SSAValue] = field(default_factory=list[SSAValue])
    updates: list[UpdateOp] = field(default_factory=list[UpdateOp])
    signature: tuple[object, ...] | None = None
    """The chain's shape, equal for chains that share a bucket in full; None
    when only the all_reduce can be bucketed."""

    @property
    def shape(self) -> tuple[int, ...]:
        return tensor_type(self.reduce.result).dims

    def last_op(self, position: dict[Operation, int]) -> Operation:
        return max([self.reduce, *self.ops], key=position.__getitem__)


class ScalarKeys:
    """Equal rank-0 computations get equal keys (so chains written with their
    own `1 - b1` each still match): a function argument by its index, a
    constant or an elementwise op on scalars by what it computes."""

    def __init__(self) -> None:
        self.keys: dict[SSAValue, Ref] = {}

    def key(self, value: SSAValue) -> Ref:
        """`value`'s key, its operands' first (iteratively: a global norm
        over hundreds of parameters is a chain of as many additions)."""
        work = [value]
        while work:
            current = work[-1]
            if current in self.keys:
                work.pop()
                continue
            pending = [o for o in self.operands(current) if o not in self.keys]
            if pending:
                work += pending
                continue
            self.keys[current] = self.compute(current)
            work.pop()
        return self.keys[value]

    def operands(self, value: SSAValue) -> Sequence[SSAValue]:
        """The values `value`'s key is made of."""
        op = value.owner
        if isinstance(op, Operation) and self.is_computed(op):
            return op.operands
        return ()

    @staticmethod
    def is_computed(op: Operation) -> bool:
        """Whether a value of `op` is keyed by what it computes."""
        scalar_operands = all(tensor_type(o).rank == 0 for o in op.operands)
        return isinstance(op, ConstantOp) or (is_chain_op(op) and scalar_operands)

    def compute(self, value: SSAValue) -> Ref:
        if isinstance(value, BlockArgument):
            return ("arg", value.index)
        op = value.owner
        assert isinstance(op, Operation)
        if self.is_computed(op):
            return (
                op.name,
                properties_key(op),
                str(value.type),
                tuple(self.keys[o] for o in op.operands),
            )
        return ("value", id(value))


def properties_key(op: Operation) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in op.properties.items()))


def chain_of(
    reduce: AllReduceOp, scalars: ScalarKeys, position: dict[Operation, int]
) -> Chain:
    """The chain of `reduce`, with its signature when it can be bucketed in
    full."""
    chain = Chain(reduce)
    signature = full_chain(chain, scalars, position)
    chain.signature = signature
    if signature is None:
        chain.ops, chain.leaves, chain.updates = [], [], []
    return chain


class NotBucketable(Exception):
    """The chain cannot be bucketed in full (only its all_reduce can)."""


def chain_members(reduce: AllReduceOp) -> tuple[set[Operation], list[UpdateOp]]:
    """The elementwise ops connected to `reduce`'s result through values of
    rank >= 1 (forward to their users, backward to their producers), and the
    updates storing their values; NotBucketable if a value of theirs has
    another kind of user."""
    block = reduce.parent_block()
    members: set[Operation] = set()
    updates: list[UpdateOp] = []
    work: list[Operation] = []

    def add(op: Operation) -> None:
        if op.parent_block() is not block:
            raise NotBucketable
        members.add(op)
        work.append(op)

    def visit_users(value: SSAValue) -> None:
        for use in value.uses:
            user = use.operation
            if isinstance(user, UpdateOp) and use.index == 1:
                if user not in updates:
                    updates.append(user)
            elif user not in members:
                if not (is_chain_op(user) or is_sum_term(user)):
                    raise NotBucketable
                add(user)

    visit_users(reduce.result)
    while work:
        op = work.pop()
        if is_sum_term(op):
            continue  # its scalar is added up outside the chain
        for result in op.results:
            visit_users(result)
        for operand in op.operands:
            producer = operand.owner
            if (
                isinstance(producer, Operation)
                and producer not in members
                and tensor_type(operand).rank != 0
                and is_chain_op(producer)
            ):
                add(producer)
    return members, updates


def full_chain(
    chain: Chain, scalars: ScalarKeys, position: dict[Operation, int]
) -> tuple[object, ...] | None:
    """Collect the chain's ops, leaves and updates; its signature, or None
    when it cannot be bucketed in full."""
    reduce = chain.reduce
    block = reduce.parent_block()
    shape = chain.shape
    try:
        members, updates = chain_members(reduce)
    except NotBucketable:
        return None
    ops = sorted(members, key=position.__getitem__)
    refs: dict[SSAValue, Ref] = {reduce.result: ("reduce",)}
    leaves: list[SSAValue] = []

    def ref(value: SSAValue) -> Ref | None:
        if value in refs:
            return refs[value]
        t = tensor_type(value)
        if t.rank == 0:
            return ("scalar", scalars.key(value))
        if t.dims != shape or not bucket_layout_ok(t):
            return None
        owner = value.owner
        if isinstance(owner, Operation) and (
            owner in members or isinstance(owner, AllReduceOp)
        ):
            return None  # another all_reduce's value, or a later chain op
        leaves.append(value)
        refs[value] = ("leaf", len(leaves) - 1, str(t.element_type), str(t.layout))
        return refs[value]

    grad = ref(reduce.operand)
    if grad is None:
        return None
    signature: list[object] = [
        (
            "all_reduce",
            str(reduce.reduction),
            grad,
            str(tensor_type(reduce.result).layout),
        )
    ]
    for index, op in enumerate(ops):
        operands = [ref(o) for o in op.operands]
        if any(r is None for r in operands):
            return None
        if is_sum_term(op):
            assert isinstance(op, ReduceOp)
            refs[op.result] = ("term", index)
            root = ("value", id(sum_root(op)))  # the bucket's terms add up here
            signature.append((op.name, "sum over every dim", tuple(operands), root))
            continue
        for j, result in enumerate(op.results):
            t = tensor_type(result)
            if t.dims != shape or not bucket_layout_ok(t):
                return None
            refs[result] = ("op", index, j)
        types = tuple(str(tensor_type(r).element_type) for r in op.results)
        layouts = tuple(str(tensor_type(r).layout) for r in op.results)
        signature.append((op.name, properties_key(op), tuple(operands), types, layouts))
    stored: list[tuple[str, UpdateOp]] = []
    for update in updates:
        value_ref = refs.get(update.value)
        if update.parent_block() is not block or value_ref is None:
            return None
        entry = ("update", value_ref, refs.get(update.param))
        stored.append((str(entry), update))
    stored.sort(key=lambda item: item[0])
    signature += [key for key, _ in stored]
    updates = [update for _, update in stored]
    chain.ops, chain.leaves, chain.updates = ops, leaves, updates
    return tuple(signature)


# ============================================================================
# Buckets
# ============================================================================


@dataclass
class Bucket:
    chains: list[Chain]
    grad_bytes: int
    ready: int = -1
    """All_reduces alone: the block position after which every gradient of
    the bucket is defined (-1: at the block's start)."""
    first_use: int = 1 << 62
    """All_reduces alone: the position of the first op reading one of them;
    the bucket's all_reduce must come before it."""


def top_level_position(op: Operation, position: dict[Operation, int]) -> int | None:
    """The block position of `op` or of its ancestor in the block."""
    current: Operation | None = op
    while current is not None and current not in position:
        current = current.parent_op()
    return None if current is None else position[current]


def gradient_ready(chain: Chain, position: dict[Operation, int]) -> int:
    """Where the all_reduce's operand is defined (-1: an argument)."""
    owner = chain.reduce.operand.owner
    if not isinstance(owner, Operation):
        return -1
    found = top_level_position(owner, position)
    return -1 if found is None else found


def first_use(chain: Chain, position: dict[Operation, int]) -> int:
    """Where (block position) the first consumer of the all_reduce stands."""
    found = 1 << 62
    for use in chain.reduce.result.uses:
        at = top_level_position(use.operation, position)
        if at is not None:
            found = min(found, at)
    return found


def fill_buckets(
    chains: Sequence[Chain],
    limit: int,
    position: dict[Operation, int],
    world: int,
) -> list[Bucket]:
    """Greedy buckets in program order, one open bucket per kind of chain.
    Parameters whose dim 0 divides by `world` do not share a bucket with
    others, so that coco-slice-state can keep a bucket's state sliced. An
    all_reduce joins a bucket of all_reduces alone only if the bucket's
    all_reduce can stand after every gradient and before every consumer."""
    open_buckets: dict[object, Bucket] = {}
    done: list[Bucket] = []
    for chain in chains:
        grad = tensor_type(chain.reduce.operand)
        if chain.signature is not None:
            sliceable = chain.shape[0] % world == 0
            kind: object = ("chain", chain.signature, sliceable)
        else:
            kind = (
                "reduce",
                str(chain.reduce.reduction),
                str(grad.element_type),
                str(grad.layout),
            )
        size = global_bytes(grad)
        ready = gradient_ready(chain, position)
        used = first_use(chain, position)
        bucket = open_buckets.get(kind)
        fits = bucket is not None and bucket.grad_bytes + size <= limit
        if bucket is not None and chain.signature is None:
            fits = fits and max(ready, bucket.ready) < min(used, bucket.first_use)
        if bucket is None or not fits:
            if bucket is not None:
                done.append(bucket)
            bucket = Bucket([], 0)
            open_buckets[kind] = bucket
        bucket.chains.append(chain)
        bucket.grad_bytes += size
        bucket.ready = max(bucket.ready, ready)
        bucket.first_use = min(bucket.first_use, used)
    done += list(open_buckets.values())
    done = [b for b in done if len(b.chains) > 1]
    done.sort(key=lambda b: position[b.chains[0].reduce])
    return done


def common_label(ops: Sequence[Operation]) -> dict[str, Attribute]:
    """The attributes of a rebuilt op: its `name` only if all copies share it."""
    attributes = dict(ops[0].attributes)
    labels = {label_of(op) for op in ops}
    if len(labels) != 1:
        attributes.pop("name", None)
    return attributes


def flat_type(t: TensorType, chains: Sequence[Chain]) -> TensorType:
    total = sum(prod(c.shape) for c in chains)
    return t.with_shape([total])


def rewrite_bucket(bucket: Bucket, label: str, position: dict[Operation, int]) -> None:
    """Replace the chains of one bucket by their flat version: after the
    bucket's last chain op, or, for all_reduces alone, right after the last
    gradient is defined. A flat op carries the fused location of the ops it
    stands for (the concats and splits, of the all_reduces or updates they
    serve)."""
    chains = bucket.chains
    at_reduces = fused_location(c.reduce for c in chains)
    first = chains[0]
    last = max((c.last_op(position) for c in chains), key=position.__getitem__)
    where = InsertPoint.after(last)
    if first.signature is None:
        block = first.reduce.parent_block()
        assert block is not None
        ops = list(position)
        where = (
            InsertPoint.at_start(block)
            if bucket.ready < 0
            else InsertPoint.after(ops[bucket.ready])
        )
    rewriter = Rewriter()
    new_ops: list[Operation] = []
    flat: dict[SSAValue, SSAValue] = {}
    """A value of the first chain → the flat value standing for all copies."""

    def concat(values: Sequence[SSAValue]) -> SSAValue:
        op = ConcatOp(values)
        op.location = at_reduces
        hint = values[0].name_hint
        op.result.name_hint = f"{label}_{hint}" if hint else label
        new_ops.append(op)
        return op.result

    if first.signature is None:
        flat[first.reduce.operand] = concat([c.reduce.operand for c in chains])
    for index, leaf in enumerate(first.leaves):
        flat[leaf] = concat([c.leaves[index] for c in chains])
    reduce = AllReduceOp(
        flat[first.reduce.operand], first.reduce.reduction.data, label=label
    )
    reduce.result.name_hint = label
    reduce.location = at_reduces
    new_ops.append(reduce)
    if first.signature is None:
        pieces = SplitOp(reduce.result, [c.shape for c in chains])
        pieces.location = at_reduces
        for chain, piece in zip(chains, pieces.pieces):
            piece.name_hint = chain.reduce.result.name_hint
        new_ops.append(pieces)
        rewriter.insert_op(new_ops, where)
        for chain, piece in zip(chains, pieces.pieces):
            chain.reduce.result.replace_all_uses_with(piece)
            rewriter.erase_op(chain.reduce)
        return
    flat[first.reduce.result] = reduce.result
    terms: list[tuple[list[Operation], ReduceOp]] = []
    for index, op in enumerate(first.ops):
        copies = [c.ops[index] for c in chains]
        operands = [flat.get(o, o) for o in op.operands]
        if is_sum_term(op):
            labels = {label_of(copy) for copy in copies}
            label_ = labels.pop() if len(labels) == 1 else None
            total = ReduceOp(operands[0], "sum", [0], label=label_)
            total.location = fused_location(copies)
            new_ops.append(total)
            terms.append((copies, total))
            continue
        rebuilt = type(op).create(
            operands=operands,
            result_types=[flat_type(tensor_type(r), chains) for r in op.results],
            properties=dict(op.properties),
            attributes=common_label(copies),
            location=fused_location(copies),
        )
        new_ops.append(rebuilt)
        for old, new in zip(op.results, rebuilt.results):
            flat[old] = new
            new.name_hint = f"{old.name_hint}_{label}" if old.name_hint else None
    splits: dict[SSAValue, SplitOp] = {}
    updates: list[Operation] = []
    for index, update in enumerate(first.updates):
        value = flat[update.value]
        if value not in splits:
            splits[value] = SplitOp(value, [c.shape for c in chains])
            splits[value].location = fused_location(c.updates[index] for c in chains)
            new_ops.append(splits[value])
        for chain, piece in zip(chains, splits[value].pieces):
            old = chain.updates[index]
            piece.name_hint = piece.name_hint or old.value.name_hint
            updates.append(
                UpdateOp.create(
                    operands=[old.param, piece],
                    attributes=dict(old.attributes),
                    location=old.location,
                )
            )
    early = terms_first(terms, new_ops, position, last)
    if early is None:
        for op in [*reversed(updates), *reversed(new_ops)]:
            op.erase()
        return
    before_terms, zero = early
    rewriter.insert_op([op for op in new_ops if op not in before_terms], where)
    rewriter.insert_op(updates, where)
    for copies, total in terms:
        copies[0].results[0].replace_all_uses_with(total.result)
        for copy in copies[1:]:
            assert zero is not None
            copy.results[0].replace_all_uses_with(zero.result)
    if zero is not None:
        drop_zero_terms(zero)
    for chain in chains:
        for update in chain.updates:
            rewriter.erase_op(update)
        for op in reversed(chain.ops):
            rewriter.erase_op(op)
        rewriter.erase_op(chain.reduce)


def drop_zero_terms(zero: ConstantOp) -> None:
    """`x + 0` of the bucket's zeroed terms is `x` (the sum is already
    reassociated); the zero goes once nothing adds it."""
    while zero.result.uses:
        add = next(iter(zero.result.uses)).operation
        assert isinstance(add, AddOp)
        lhs, rhs = add.operands
        add.results[0].replace_all_uses_with(rhs if lhs is zero.result else lhs)
        Rewriter.erase_op(add)
    Rewriter.erase_op(zero)


def terms_first(
    terms: list[tuple[list[Operation], ReduceOp]],
    new_ops: list[Operation],
    position: dict[Operation, int],
    last: Operation,
) -> tuple[set[Operation], ConstantOp | None] | None:
    """Insert what a bucket's sum terms need (the flat ops they are computed
    from and the terms, and a zero for the other parameters' terms) before
    the first op adding them up, when that op stands before the bucket's
    last chain op (its scalar, `clip_grad_norm_`'s coefficient, is read by
    the chain); the inserted ops, and the zero. The first parameter's term
    becomes the bucket's whole sum, the others 0, so the sum tree above them
    adds the same (reassociated). None, inserting nothing, when an operand
    those ops read from outside is defined only after that point."""
    if not terms:
        return set(), None
    ops = list(position)
    users = [
        top_level_position(use.operation, position)
        for copies, _ in terms
        for copy in copies
        for use in copy.results[0].uses
    ]
    first_user = min(u for u in users if u is not None)
    needed: set[Operation] = set()
    work: list[Operation] = [total for _, total in terms]
    while work:
        op = work.pop()
        if op in needed:
            continue
        needed.add(op)
        work += [o.owner for o in op.operands if o.owner in new_ops]  # type: ignore[misc]
    zero = ConstantOp(0.0, tensor_type(terms[0][1].result).element_type)
    zero.location = fused_location(copy for copies, _ in terms for copy in copies[1:])
    ordered = [op for op in new_ops if op in needed]
    if first_user > position[last]:
        Rewriter.insert_op([zero], InsertPoint.after(last))
        return set(), zero
    for op in ordered:
        for operand in op.operands:
            owner = operand.owner
            if owner in needed or isinstance(operand, BlockArgument):
                continue
            at = top_level_position(owner, position)  # type: ignore[arg-type]
            if at is None or at >= first_user:
                zero.erase()
                return None
    Rewriter.insert_op([zero, *ordered], InsertPoint.before(ops[first_user]))
    return needed, zero


# ============================================================================
# The pass
# ============================================================================


@dataclass(frozen=True)
class Bucketing(AllReducePass):
    """Concatenate parameters' all_reduces (and their optimizer updates) into
    flat buckets of up to `bytes` bytes of gradients."""

    name = "coco-bucket"

    bytes: int = DEFAULT_BUCKET_BYTES
    """The bucket capacity in bytes of gradients (DDP's bucket_cap_mb)."""

    world: int | None = None
    """The world size the program will run on (default: `coco.world_size`)."""

    chains_only: bool = False
    """Only bucket all_reduces whose whole update chain shares the bucket,
    not all_reduces alone (coco-optimize's choice: coco-reorder moves a
    chain that is not bucketed onto slices, which an all_reduce bucketed
    alone would prevent)."""

    def check_options(self) -> None:
        self.require_at_least("bytes", 1)
        self.require_at_least("world", 1)

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, AllReduceOp)
        return reduce_problem(op, self.world)

    def rewrite(self, module: ModuleOp) -> None:
        for function in list(module.ops):
            if isinstance(function, FuncOp) and not function.is_declaration:
                self.bucket_function(function)

    def bucket_function(self, function: FuncOp) -> None:
        block = function.body.block
        position = {op: i for i, op in enumerate(block.ops)}
        scalars = ScalarKeys()
        chains = [
            chain_of(op, scalars, position)
            for op in block.ops
            if isinstance(op, AllReduceOp)
            and self.targets(op)
            and reduce_problem(op, self.world) is None
        ]
        if self.chains_only:
            chains = [c for c in chains if c.signature is not None]
        size, _ = bucket_world(function, self.world)
        buckets = fill_buckets(chains, self.bytes, position, size)
        taken = {label_of(op) for op in function.walk() if label_of(op) is not None}
        number = 0
        for bucket in buckets:
            while f"bucket{number}" in taken:
                number += 1
            rewrite_bucket(bucket, f"bucket{number}", position)
            number += 1
