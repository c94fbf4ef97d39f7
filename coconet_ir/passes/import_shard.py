"""coco-import-shard: a program sharded with MLIR's `shard` dialect, as coco.

Input: tensor-level functions annotated the way MLIR 22's
`sharding-propagation` leaves them — one `shard.grid` of one axis, every value
wrapped in `shard.shard` ops (the sharding an op gives its result, and with
`annotate_for_users` the sharding its users want) — over `linalg.matmul`,
`linalg.fill`, `tensor.empty`, elementwise linalg ops (named, `elementwise`,
or a `linalg.generic` whose body is one arith/math op) and elementwise arith
and math ops on tensors. Output: the same math in coco, with the grid's size as
the module's world size (docs/mlir-interop.md):

- a sharding's layout: a dim split over the grid's axis is `sliced<d>`, no
  split `replicated`; a function argument takes the sharding of its first
  annotation, a result that of the value returned;
- a compute op is the coco op of the same math on the coco values of its
  operands; coco's layout rules give its layout (a matmul whose contracted dim
  is split gives partial sums, `local`), and the op's result annotation is
  reached with the collective the change implies; so is each users'
  annotation that differs from its value's sharding:

      local -> replicated   coco.all_reduce      (partial -> replicated)
      local -> sliced<d>    coco.reduce_scatter  (partial -> split)
      sliced -> replicated  coco.all_gather
      replicated -> sliced  coco.all_slice
      sliced<d> -> sliced<e> coco.all_to_all

  A result of partial sums without a result annotation is all-reduced, as
  MLIR's `shard-partition` does (MLIR 22's shardings have no partial axes: a
  split reduction is all-reduced unless the result is split).

Preconditions: one 1-axis grid of static size, even shards (no halos or
explicit offsets, split dims divisible by the grid size), static tensor shapes
of coco element types, matmul inits filled with zero. Anything else is refused
with a diagnostic naming the op and the rule; the module is only replaced once
the whole import has succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects import shard as xdsl_shard
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.dialects.linalg import abstract_ops, attrs
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from coconet_ir.dialects import coco
from coconet_ir.dialects import linalg as mlir_linalg
from coconet_ir.dialects import shard as mlir_shard
from coconet_ir.dialects.coco import (
    REPLICATED,
    WORLD_SIZE_ATTR,
    LayoutAttr,
    ReductionKind,
    element_type_problem,
    is_float,
)
from coconet_ir.passes.base import PassRefused, move_contents

PASS_NAME = "coco-import-shard"

# ---------------------------------------------------------------------------
# What each MLIR op becomes
# ---------------------------------------------------------------------------

Elementwise = type[coco.ElementwiseBinaryOp | coco.ElementwiseUnaryOp | coco.SelectOp]

SCALAR_OPS: dict[str, Elementwise] = {
    "arith.addf": coco.AddOp,
    "arith.addi": coco.AddOp,
    "arith.subf": coco.SubOp,
    "arith.subi": coco.SubOp,
    "arith.mulf": coco.MulOp,
    "arith.muli": coco.MulOp,
    "arith.divf": coco.DivOp,
    "arith.maximumf": coco.MaxOp,
    "arith.maxnumf": coco.MaxOp,
    "arith.maxsi": coco.MaxOp,
    "arith.minimumf": coco.MinOp,
    "arith.minnumf": coco.MinOp,
    "arith.minsi": coco.MinOp,
    "arith.negf": coco.NegOp,
    "arith.select": coco.SelectOp,
    "math.absf": coco.AbsOp,
    "math.exp": coco.ExpOp,
    "math.log": coco.LogOp,
    "math.sqrt": coco.SqrtOp,
    "math.rsqrt": coco.RsqrtOp,
    "math.tanh": coco.TanhOp,
    "math.powf": coco.PowOp,
}
"""The coco op of each arith/math op, on tensors or in a linalg.generic body."""

NAMED_OPS: dict[str, Elementwise] = {
    "linalg.add": coco.AddOp,
    "linalg.sub": coco.SubOp,
    "linalg.mul": coco.MulOp,
    "linalg.div": coco.DivOp,
    "linalg.max": coco.MaxOp,
    "linalg.min": coco.MinOp,
    "linalg.powf": coco.PowOp,
    "linalg.exp": coco.ExpOp,
    "linalg.log": coco.LogOp,
    "linalg.sqrt": coco.SqrtOp,
    "linalg.rsqrt": coco.RsqrtOp,
    "linalg.tanh": coco.TanhOp,
    "linalg.abs": coco.AbsOp,
    "linalg.negf": coco.NegOp,
    "linalg.select": coco.SelectOp,
}
"""The coco op of each named elementwise linalg op."""

Kind = mlir_linalg.ElementwiseKind

ELEMENTWISE_KINDS: dict[Kind, Elementwise] = {
    Kind.ADD: coco.AddOp,
    Kind.SUB: coco.SubOp,
    Kind.MUL: coco.MulOp,
    Kind.DIV: coco.DivOp,
    Kind.MAX_SIGNED: coco.MaxOp,
    Kind.MIN_SIGNED: coco.MinOp,
    Kind.POWF: coco.PowOp,
    Kind.EXP: coco.ExpOp,
    Kind.LOG: coco.LogOp,
    Kind.SQRT: coco.SqrtOp,
    Kind.RSQRT: coco.RsqrtOp,
    Kind.TANH: coco.TanhOp,
    Kind.ABS: coco.AbsOp,
    Kind.NEGF: coco.NegOp,
    Kind.SELECT: coco.SelectOp,
}
"""The coco op of each `linalg.elementwise` kind that has one."""

PARTITIONED_OPS = frozenset(
    op.name
    for op in (
        *(o for o in xdsl_shard.Shard.operations if o.name.startswith("shard.")),
        *mlir_shard.ADDED,
    )
    if op.name not in {"shard.grid", "shard.sharding", "shard.shard"}
)
"""Shard ops that only appear once a program is partitioned (per device)."""


# ---------------------------------------------------------------------------
# What an MLIR value stands for during the import
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Distributed:
    """A tensor that is a coco value (its type carries the layout)."""

    value: SSAValue


@dataclass(frozen=True)
class Splat:
    """A tensor of one constant value everywhere (a fill or a splat constant);
    a coco rank-0 constant where an elementwise op uses it."""

    value: float | int
    element_type: Attribute


@dataclass(frozen=True)
class Uninitialized:
    """A `tensor.empty`: only usable as the outs of a linalg op."""


@dataclass(frozen=True)
class Scalar:
    """An `arith.constant` scalar: only usable as the value of a fill."""

    value: float | int


@dataclass(frozen=True)
class Sharding:
    """A `shard.sharding`: the tensor dim split over the grid's axis, if any."""

    split_dim: int | None
    op: Operation


Entry = Distributed | Splat | Uninitialized | Scalar | Sharding


class ImportRefused(Exception):
    """Why the import stops, at which op (turned into a PassRefused)."""

    def __init__(self, op: Operation, reason: str):
        super().__init__(reason)
        self.op = op
        self.reason = reason


# ---------------------------------------------------------------------------
# The import
# ---------------------------------------------------------------------------


@dataclass
class ShardImporter:
    """Builds the coco module for a shard-annotated module, or refuses."""

    module: ModuleOp
    world: int = 0
    grid_names: set[str] = field(default_factory=set[str])

    def run(self) -> ModuleOp:
        self.read_grids()
        imported = ModuleOp([], attributes=dict(self.module.attributes))
        imported.attributes[WORLD_SIZE_ATTR] = IntegerAttr(self.world, i64)
        for op in self.module.ops:
            if isinstance(op, xdsl_shard.GridOp):
                continue
            if not isinstance(op, func.FuncOp):
                raise ImportRefused(op, "only functions and shard.grid are imported")
            imported.body.block.add_op(FunctionImporter(self, op).run())
        return imported

    def read_grids(self) -> None:
        grids = [op for op in self.module.ops if isinstance(op, xdsl_shard.GridOp)]
        if not grids:
            raise ImportRefused(
                self.module, "no shard.grid: nothing says how the program is sharded"
            )
        for grid in grids:
            shape = grid.shape.get_values()
            if len(shape) != 1:
                raise ImportRefused(
                    grid,
                    f"grid @{grid.sym_name.data} has {len(shape)} axes; coco's "
                    "ranks form one group, so only a grid of one axis is imported",
                )
            if shape[0] < 1:
                raise ImportRefused(
                    grid, f"grid @{grid.sym_name.data} must have a static size"
                )
            if self.world and shape[0] != self.world:
                raise ImportRefused(
                    grid,
                    f"grid @{grid.sym_name.data} has {shape[0]} devices, another "
                    f"grid {self.world}: one world size per module",
                )
            self.world = shape[0]
            self.grid_names.add(grid.sym_name.data)
        declared = self.module.attributes.get(WORLD_SIZE_ATTR)
        if declared is not None and declared != IntegerAttr(self.world, i64):
            raise ImportRefused(
                self.module,
                f"{WORLD_SIZE_ATTR} is {declared}, but the grid has {self.world} "
                "devices",
            )


@dataclass
class FunctionImporter:
    """Imports one function: block arguments first, then each op in order."""

    importer: ShardImporter
    source: func.FuncOp
    entries: dict[SSAValue, Entry] = field(default_factory=dict[SSAValue, Entry])
    block: Block = field(default_factory=Block)

    @property
    def world(self) -> int:
        return self.importer.world

    def run(self) -> func.FuncOp:
        if self.source.is_declaration:
            raise ImportRefused(self.source, "a function declaration has no body")
        body = self.source.body
        if len(body.blocks) != 1:
            raise ImportRefused(self.source, "only single-block functions are imported")
        self.import_arguments(body.block)
        result_types: list[Attribute] = []
        for op in body.block.ops:
            if isinstance(op, func.ReturnOp):
                values = [self.distributed(op, v) for v in op.arguments]
                result_types = [v.type for v in values]
                self.emit(func.ReturnOp(*values), op)
            else:
                self.import_op(op)
        arg_types = [arg.type for arg in self.block.args]
        imported = func.FuncOp(
            self.source.sym_name.data,
            FunctionType.from_lists(arg_types, result_types),
            Region(self.block),
            self.source.sym_visibility,
        )
        imported.location = self.source.location
        return imported

    # -- arguments ------------------------------------------------------------

    def import_arguments(self, block: Block) -> None:
        """Each tensor argument gets the layout of its first annotation
        (result annotation first, else for its users); unannotated ones are
        replicated."""
        for arg in block.args:
            if not isinstance(arg.type, TensorType):
                raise ImportRefused(
                    self.source,
                    f"argument #{arg.index} has type {arg.type}; only tensor "
                    "arguments are imported",
                )
            annotations = [
                op
                for op in block.ops
                if isinstance(op, xdsl_shard.ShardOp) and op.src == arg
            ]
            own = [op for op in annotations if op.annotate_for_users is None]
            first = (own or annotations or [None])[0]
            layout = REPLICATED
            if first is not None:
                layout = self.layout(first, self.sharding_of(first), arg.type)
            new = self.block.insert_arg(self.coco_type(arg.type, layout), arg.index)
            new.name_hint = arg.name_hint
            self.entries[arg] = Distributed(new)

    # -- ops -------------------------------------------------------------------

    def import_op(self, op: Operation) -> None:
        match op:
            case xdsl_shard.ShardingOp():
                self.import_sharding(op)
            case xdsl_shard.ShardOp():
                self.import_annotation(op)
            case tensor.EmptyOp():
                if op.dynamic_sizes:
                    raise ImportRefused(op, "dynamic sizes have no coco type")
                self.entries[op.tensor] = Uninitialized()
            case arith.ConstantOp():
                self.import_constant(op)
            case linalg.FillOp():
                self.import_fill(op)
            case linalg.MatmulOp():
                self.import_matmul(op)
            case linalg.GenericOp():
                self.import_generic(op)
            case mlir_linalg.ElementwiseOp():
                kind = op.kind.data
                if kind not in ELEMENTWISE_KINDS:
                    raise ImportRefused(
                        op, f"elementwise kind {kind} has no coco equivalent"
                    )
                self.check_identity_maps(op)
                self.import_elementwise(op, ELEMENTWISE_KINDS[kind], op.inputs)
            case abstract_ops.LinalgStructuredOperation() if op.name in NAMED_OPS:
                self.import_elementwise(op, NAMED_OPS[op.name], op.inputs)
            case _ if op.name in SCALAR_OPS and self.on_tensors(op):
                self.import_elementwise(op, SCALAR_OPS[op.name], op.operands)
            case _ if op.name in PARTITIONED_OPS:
                raise ImportRefused(
                    op,
                    "is an op of partitioned (per-device) IR: import the annotated "
                    "program, before shard-partition",
                )
            case _:
                raise ImportRefused(op, "has no coco equivalent")

    def import_sharding(self, op: xdsl_shard.ShardingOp) -> None:
        self.entries[op.result] = self.decode_sharding(op)

    def decode_sharding(self, op: xdsl_shard.ShardingOp) -> Sharding:
        """The split dim of a `shard.sharding`, or a refusal of what coco's
        layouts cannot say."""
        if op.grid.root_reference.data not in self.importer.grid_names:
            raise ImportRefused(op, f"no shard.grid {op.grid}")
        if (
            op.static_halo_sizes.get_values()
            or op.static_sharded_dims_offsets.get_values()
            or op.dynamic_halo_sizes
            or op.dynamic_sharded_dims_offsets
        ):
            raise ImportRefused(
                op,
                "halos and explicit shard offsets have no coco layout (coco's "
                "slices are equal blocks)",
            )
        split = [
            dim for dim, axes in enumerate(op.split_axes.axes) if axes.get_values()
        ]
        if len(split) > 1:
            raise ImportRefused(
                op, f"splits dims {split} over one grid axis; coco slices one dim"
            )
        return Sharding(split[0] if split else None, op)

    def import_annotation(self, op: xdsl_shard.ShardOp) -> None:
        """A `shard.shard`: the value in the annotated sharding."""
        source = self.entry(op, op.src)
        if not isinstance(source, Distributed):
            self.entries[op.result] = source  # a fill, a constant or an init
            return
        target = self.layout(op, self.sharding_of(op), op.src.type)
        self.entries[op.result] = Distributed(self.reshard(source.value, target, op))

    def import_constant(self, op: arith.ConstantOp) -> None:
        value = op.value
        if isinstance(value, FloatAttr | IntegerAttr):
            self.entries[op.result] = Scalar(value.value.data)
            return
        if isinstance(value, DenseIntOrFPElementsAttr) and value.is_splat():
            assert isinstance(value.type, TensorType)
            element = value.get_values()[0]
            if not isinstance(element, tuple):
                self.entries[op.result] = Splat(element, value.type.element_type)
                return
        raise ImportRefused(op, "only scalar and real splat constants are imported")

    def import_fill(self, op: linalg.FillOp) -> None:
        (value,) = op.inputs
        scalar = self.entry(op, value)
        if not isinstance(scalar, Scalar):
            raise ImportRefused(op, "fills with a value that is not a constant")
        (result,) = op.res
        assert isinstance(result.type, TensorType)
        self.entries[result] = Splat(scalar.value, result.type.element_type)

    def import_matmul(self, op: linalg.MatmulOp) -> None:
        defaults = linalg.MatmulOp.get_irdl_definition().properties["indexing_maps"]
        if op.indexing_maps != defaults.default_value:
            raise ImportRefused(
                op, "only the plain A·B indexing maps (no transposes or broadcasts)"
            )
        (init,) = op.outputs
        zero = self.entry(op, init)
        if not isinstance(zero, Splat) or zero.value != 0:
            raise ImportRefused(
                op,
                f"accumulates into {_value_text(init)}, not a zero-filled tensor: "
                "C + A·B is not coco.matmul (fill the init with 0 and add C with "
                "linalg.add)",
            )
        lhs, rhs = (self.distributed(op, v) for v in op.inputs)
        product = self.build(op, lambda: coco.MatmulOp(lhs, rhs), [lhs, rhs])
        (result,) = op.res
        self.define(op, result, product)

    def import_generic(self, op: linalg.GenericOp) -> None:
        """A `linalg.generic` whose body applies one arith/math op to its inputs."""
        rank = len(op.res[0].type.get_shape()) if len(op.res) == 1 else -1
        if len(op.outputs) != 1 or rank < 0:
            raise ImportRefused(op, "only a generic with one tensor result")
        self.check_identity_maps(op)
        if any(it.data != attrs.IteratorType.PARALLEL for it in op.iterator_types):
            raise ImportRefused(op, "only a generic whose loops are all parallel")
        body = list(op.body.block.ops)
        if len(body) != 2 or body[0].name not in SCALAR_OPS:
            names = ", ".join(o.name for o in body[:-1])
            raise ImportRefused(
                op,
                f"body ({names}) is not one elementwise arith/math op with a coco "
                "equivalent",
            )
        scalar, yielded = body
        args = op.body.block.args
        inputs: list[SSAValue] = []
        for operand in scalar.operands:
            if operand not in args or args.index(operand) >= len(op.inputs):
                raise ImportRefused(
                    op, "body uses a value other than its inputs' elements"
                )
            inputs.append(op.inputs[args.index(operand)])
        if list(yielded.operands) != [scalar.results[0]]:
            raise ImportRefused(op, "body must yield its one op's result")
        self.import_elementwise(op, SCALAR_OPS[scalar.name], inputs)

    def import_elementwise(
        self, op: Operation, kind: Elementwise, inputs: Sequence[SSAValue]
    ) -> None:
        entries = [self.entry(op, v) for v in inputs]
        if not any(isinstance(e, Distributed) for e in entries):
            raise ImportRefused(op, "needs an operand that is not a constant")
        element_type = _mlir_tensor_type(op.results[0]).element_type
        if kind is coco.DivOp and not is_float(element_type):
            raise ImportRefused(op, "integer division is not imported (coco.div)")
        operands: list[SSAValue] = []
        for value, entry in zip(inputs, entries, strict=True):
            if isinstance(entry, Splat):
                constant = coco.ConstantOp(entry.value, entry.element_type)
                self.emit(constant, op)
                operands.append(constant.result)
            else:
                operands.append(self.distributed(op, value))
        result = self.build(op, lambda: kind(*operands), operands)
        self.define(op, op.results[0], result)

    # -- results and annotations -------------------------------------------------

    def define(self, op: Operation, result: SSAValue, value: SSAValue) -> None:
        """Map `result` to `value` in the sharding of the result's own
        annotation (partial sums without one: all-reduced)."""
        annotation = next(
            (
                use.operation
                for use in result.uses
                if isinstance(use.operation, xdsl_shard.ShardOp)
                and use.operation.annotate_for_users is None
            ),
            None,
        )
        if annotation is not None:
            sharding = self.sharding_of(annotation)
            target = self.layout(annotation, sharding, result.type)
            value = self.reshard(value, target, annotation)
        elif _coco_type(value).layout.is_local:
            value = self.reshard(value, REPLICATED, op)
        self.entries[result] = Distributed(value)

    def reshard(self, value: SSAValue, target: LayoutAttr, at: Operation) -> SSAValue:
        """`value` in layout `target`, through the collective the change needs."""
        collective = layout_change(value, target)
        if collective is None:
            return value
        self.emit(collective, at)
        return collective.results[0]

    # -- helpers -----------------------------------------------------------------

    def emit(self, op: Operation, source: Operation) -> None:
        op.location = source.location
        self.block.add_op(op)

    def build(
        self, op: Operation, make: Callable[[], Operation], operands: list[SSAValue]
    ) -> SSAValue:
        """The coco op `make` builds for `op`, emitted; a layout rule it breaks
        refuses the import."""
        try:
            built = make()
        except VerifyException as err:
            layouts = ", ".join(str(_coco_type(v).layout) for v in operands)
            rule = getattr(err, "rule", str(err))
            raise ImportRefused(
                op, f"operands in layouts ({layouts}) have no coco equivalent: {rule}"
            ) from None
        self.emit(built, op)
        return built.results[0]

    def entry(self, op: Operation, value: SSAValue) -> Entry:
        if value not in self.entries:
            raise ImportRefused(op, f"uses {_value_text(value)}, which is not imported")
        return self.entries[value]

    def distributed(self, op: Operation, value: SSAValue) -> SSAValue:
        """The coco value of a tensor operand."""
        entry = self.entry(op, value)
        if isinstance(entry, Distributed):
            return entry.value
        what = {
            Splat: "a constant tensor (coco constants are rank-0 operands of "
            "elementwise ops)",
            Uninitialized: "an uninitialized tensor (tensor.empty)",
        }.get(type(entry), "not a tensor")
        raise ImportRefused(op, f"operand {_value_text(value)} is {what}")

    def sharding_of(self, op: xdsl_shard.ShardOp) -> Sharding:
        """The sharding a `shard.shard` annotates (read from its defining op, as
        an argument's annotation may come before it)."""
        definition = op.sharding.owner
        if not isinstance(definition, xdsl_shard.ShardingOp):
            raise ImportRefused(op, "its sharding is not a shard.sharding op")
        return self.decode_sharding(definition)

    def layout(self, op: Operation, sharding: Sharding, of: Attribute) -> LayoutAttr:
        """The coco layout of `sharding` on a tensor of type `of`."""
        assert isinstance(of, TensorType)
        dim = sharding.split_dim
        if dim is None:
            return REPLICATED
        shape = of.get_shape()
        if dim >= len(shape):
            raise ImportRefused(
                op, f"splits dim {dim} of a tensor of rank {len(shape)}"
            )
        if shape[dim] % self.world:
            raise ImportRefused(
                op,
                f"splits dim {dim} of size {shape[dim]} over {self.world} devices: "
                "coco's slices are equal blocks",
            )
        return LayoutAttr.sliced(dim)

    def coco_type(self, of: TensorType, layout: LayoutAttr) -> coco.TensorType:
        shape = of.get_shape()
        if any(d < 1 for d in shape):
            raise ImportRefused(self.source, f"{of} has no static shape")
        problem = element_type_problem(of.element_type)
        if problem is not None:
            raise ImportRefused(self.source, problem)
        return coco.TensorType(shape, of.element_type, layout)

    def check_identity_maps(self, op: abstract_ops.LinalgStructuredOperation) -> None:
        maps = [m.data for m in op.get_indexing_maps().data]
        rank = len(_mlir_tensor_type(op.results[0]).get_shape())
        if any(m != AffineMap.identity(rank) for m in maps):
            raise ImportRefused(
                op, "only identity indexing maps (no broadcasts or transposes)"
            )

    @staticmethod
    def on_tensors(op: Operation) -> bool:
        return all(isinstance(r.type, TensorType) for r in op.results)


def layout_change(value: SSAValue, target: LayoutAttr) -> Operation | None:
    """The collective that brings `value` to layout `target` (None: it is
    there): partial sums are reduced (all_reduce, reduce_scatter), slices
    gathered (all_gather) or re-cut (all_to_all), a replicated value sliced
    (all_slice)."""
    source = _coco_type(value).layout
    if source == target:
        return None
    assert not target.is_local, "a sharding is never partial"
    if source.is_local:
        if target.is_replicated:
            return coco.AllReduceOp(value, ReductionKind.SUM)
        return coco.ReduceScatterOp(value, ReductionKind.SUM, target.sliced_dim)
    if source.is_sliced:
        if target.is_replicated:
            return coco.AllGatherOp(value)
        return coco.AllToAllOp(value, target.sliced_dim)
    return coco.AllSliceOp(value, target.sliced_dim)


def _coco_type(value: SSAValue) -> coco.TensorType:
    assert isinstance(value.type, coco.TensorType)
    return value.type


def _mlir_tensor_type(value: SSAValue) -> TensorType[Attribute]:
    assert isinstance(value.type, TensorType)
    return value.type  # pyright: ignore[reportUnknownVariableType]


def _value_text(value: SSAValue) -> str:
    return f"%{value.name_hint}" if value.name_hint else "a value"


def is_coco_already(module: ModuleOp) -> bool:
    """No `shard.grid` and no builtin tensor anywhere: a coco program (or an
    imported one), which the import leaves as it is."""
    for op in module.walk():
        if isinstance(op, xdsl_shard.GridOp):
            return False
        for value in (*op.operands, *op.results):
            if isinstance(value.type, TensorType):
                return False
        for region in op.regions:
            for block in region.blocks:
                if any(isinstance(a.type, TensorType) for a in block.args):
                    return False
    return True


@dataclass(frozen=True)
class ImportShard(ModulePass):
    """Import a program sharded by MLIR's shard dialect (one-axis grid,
    `shard.sharding`/`shard.shard` annotations) as a coco program with the
    layouts and collectives its annotations imply."""

    name = PASS_NAME

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if is_coco_already(op):
            return  # nothing to import (the pass is idempotent)
        try:
            imported = ShardImporter(op).run()
        except ImportRefused as refused:
            raise PassRefused(f"{PASS_NAME}: {refused.reason}", refused.op) from None
        move_contents(op, imported)
