"""xDSL's upstream `gpu` dialect with MLIR's syntax where xDSL's differs.

xDSL 0.74 has no custom syntax for `gpu.module`, `gpu.func` and
`gpu.launch_func` (it prints and parses only their generic form), and it marks
a kernel with a `kernel` *property* where MLIR uses the discardable attribute
`gpu.kernel` — so MLIR rejects the generic form of an xDSL kernel launch
("kernel function is missing the 'gpu.kernel' attribute") and xDSL cannot read
what mlir-opt prints. This module subclasses the three ops (same names, same
fields) with MLIR 22's custom syntax and MLIR's kernel marker, and `GPU` is
xDSL's dialect with them swapped in. `coconet-opt` and `ir.make_context` load
it in place of xDSL's (plain `xdsl-opt` keeps xDSL's own); docs/gpu/mlir.md.

    gpu.module @kernels {
      gpu.func @k(%n: index, %x: memref<4xf32>) kernel attributes {...} {...}
    }
    gpu.launch_func @kernels::@k blocks in (%b, %c1, %c1)
        threads in (%t, %c1, %c1) args(%n : index, %x : memref<4xf32>)

Build kernels with `FuncOp(..., kernel=True)` from here (it sets
`gpu.kernel`); the printers accept either marker (`is_kernel`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto
from functools import cache
from itertools import accumulate
from typing import NamedTuple

from xdsl.dialects import gpu
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    SymbolRefAttr,
    UnitAttr,
    i32,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    Region,
    SSAValue,
)
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

DimensionAttr = gpu.DimensionAttr
DimensionEnum = gpu.DimensionEnum

KERNEL_ATTR = "gpu.kernel"
"""MLIR's marker of a kernel function."""

WORKGROUP_ATTRIBUTIONS_ATTR = "workgroup_attributions"
"""How many of a `gpu.func`'s entry block arguments, after its inputs, are
workgroup (shared) memory buffers, as MLIR counts them."""


class AddressSpace(StrEnum):
    GLOBAL = auto()
    WORKGROUP = auto()
    PRIVATE = auto()


@irdl_attr_definition
class AddressSpaceAttr(EnumAttribute[AddressSpace]):
    """`#gpu.address_space<workgroup>`: the memory space of a memref (MLIR's
    spelling; xDSL 0.74 has no such attribute)."""

    name = "gpu.address_space"

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(str(self.data))

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> AddressSpace:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(AddressSpace)


WORKGROUP = AddressSpaceAttr(AddressSpace.WORKGROUP)


def workgroup_memref(element_type: Attribute, count: int) -> MemRefType:
    """`memref<count x T, #gpu.address_space<workgroup>>`: a block's shared
    buffer, as a workgroup attribution of its kernel."""
    return MemRefType(element_type, [count], memory_space=WORKGROUP)


def is_kernel(op: gpu.FuncOp) -> bool:
    """Whether `op` is a kernel, marked MLIR's way or xDSL's."""
    return op.kernel is not None or KERNEL_ATTR in op.attributes


class ModuleOp(gpu.ModuleOp):
    """`gpu.module @name { ... }`: the kernels of a program."""

    name = "gpu.module"

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=("sym_name",), print_keyword=True
        )
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ModuleOp:
        name = parser.parse_symbol_name()
        attributes = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        op = cls.create(properties={"sym_name": name}, regions=[body])
        if attributes is not None:
            op.attributes |= attributes.data
        return op


class FuncOp(gpu.FuncOp):
    """`gpu.func @name(%a: T, ...) [workgroup(%s : memref<...>, ...)] [kernel]
    [attributes {...}] { ... }`. Workgroup attributions (a block's shared
    buffers) are entry block arguments after the inputs, counted by the
    `workgroup_attributions` attribute, as in MLIR; add them with
    `add_workgroup_buffer`."""

    name = "gpu.func"

    def __init__(
        self,
        name: str,
        function_type: FunctionType | tuple[Sequence[Attribute], Sequence[Attribute]],
        region: Region | type[Region.DEFAULT] = Region.DEFAULT,
        kernel: bool | None = None,
        known_block_size: Sequence[int] | None = None,
        known_grid_size: Sequence[int] | None = None,
    ):
        super().__init__(
            name,
            function_type,
            region,
            known_block_size=known_block_size,
            known_grid_size=known_grid_size,
        )
        if kernel:
            self.attributes[KERNEL_ATTR] = UnitAttr()

    @property
    def workgroup_count(self) -> int:
        count = self.attributes.get(WORKGROUP_ATTRIBUTIONS_ATTR)
        return count.value.data if isinstance(count, IntegerAttr) else 0

    def add_workgroup_buffer(self, element_type: Attribute, count: int) -> SSAValue:
        """A new workgroup buffer of `count` elements, the kernel's block
        argument that names it."""
        argument = self.body.block.insert_arg(
            workgroup_memref(element_type, count), len(self.body.block.args)
        )
        self.attributes[WORKGROUP_ATTRIBUTIONS_ATTR] = IntegerAttr(
            self.workgroup_count + 1, i64
        )
        return argument

    def verify_(self) -> None:
        block = self.body.blocks[0]
        inputs = self.function_type.inputs.data
        count = len(block.args) - len(inputs)
        if count != self.workgroup_count or block.arg_types[: len(inputs)] != inputs:
            raise VerifyException(
                "the entry block's arguments must be the function's inputs, "
                f"then its {self.workgroup_count} workgroup attribution(s)"
            )
        for argument in block.args[len(inputs) :]:
            if not (
                isinstance(argument.type, MemRefType)
                and argument.type.memory_space == WORKGROUP
            ):
                raise VerifyException(
                    "a workgroup attribution must be a memref in "
                    "#gpu.address_space<workgroup>"
                )
        if is_kernel(self) and self.function_type.outputs.data:
            raise VerifyException("Expected void return type for kernel function")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        block = self.body.blocks[0] if self.body.blocks else None
        inputs = len(self.function_type.inputs.data)
        printer.print_string("(")
        if block is not None:
            printer.print_list(block.args[:inputs], printer.print_block_argument)
        else:
            printer.print_list(self.function_type.inputs.data, printer.print_attribute)
        printer.print_string(")")
        outputs = self.function_type.outputs.data
        if outputs:
            printer.print_string(" -> ")
            if len(outputs) == 1:
                printer.print_attribute(outputs[0])
            else:
                with printer.in_parens():
                    printer.print_list(outputs, printer.print_attribute)
        if block is not None and block.args[inputs:]:

            def print_attribution(argument: BlockArgument) -> None:
                printer.print_block_argument(argument, print_type=False)
                printer.print_string(" : ")
                printer.print_attribute(argument.type)

            printer.print_string(" workgroup(")
            printer.print_list(block.args[inputs:], print_attribution)
            printer.print_string(")")
        if is_kernel(self):
            printer.print_string(" kernel")
        printer.print_op_attributes(
            self.attributes,
            reserved_attr_names=("sym_name", KERNEL_ATTR, WORKGROUP_ATTRIBUTIONS_ATTR),
            print_keyword=True,
        )
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name = parser.parse_symbol_name().data
        arguments = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_argument
        )
        outputs: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            if parser.parse_optional_punctuation("(") is not None:
                if parser.parse_optional_punctuation(")") is None:
                    outputs = parser.parse_comma_separated_list(
                        Parser.Delimiter.NONE, parser.parse_type
                    )
                    parser.parse_punctuation(")")
            else:
                outputs = [parser.parse_type()]
        workgroup: list[Parser.Argument] = []
        if parser.parse_optional_keyword("workgroup") is not None:

            def parse_attribution() -> Parser.Argument:
                unresolved = parser.parse_argument(expect_type=False)
                parser.parse_punctuation(":")
                return unresolved.resolve(parser.parse_type())

            workgroup = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parse_attribution
            )
        kernel = parser.parse_optional_keyword("kernel") is not None
        attributes = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region([*arguments, *workgroup])
        inputs = [a.type for a in arguments]
        op = cls(name, (inputs, outputs), body, kernel=kernel)
        if attributes is not None:
            op.attributes |= {
                k: v
                for k, v in attributes.data.items()
                if k != WORKGROUP_ATTRIBUTIONS_ATTR
            }
        if workgroup:
            op.attributes[WORKGROUP_ATTRIBUTIONS_ATTR] = IntegerAttr(
                len(workgroup), i64
            )
        return op


SEGMENTS = "operandSegmentSizes"


@cache
def launch_segments(args: int) -> DenseArrayBase:
    """`gpu.launch_func`'s operand segment sizes for 3 grid and 3 block sizes
    and `args` kernel arguments: async dependencies, grid x/y/z, block x/y/z,
    cluster x/y/z, dynamic shared memory, kernel operands, async object."""
    return DenseArrayBase.from_list(i32, [0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, args, 0])


class LaunchParts(NamedTuple):
    """A launch's operands by role (`LaunchFuncOp.parts`)."""

    grid: tuple[SSAValue, ...]
    block: tuple[SSAValue, ...]
    shared: SSAValue | None
    args: tuple[SSAValue, ...]


def launch_parts(op: gpu.LaunchFuncOp) -> LaunchParts:
    """The grid and block sizes, the dynamic shared memory size and the
    kernel's arguments of a launch, from one reading of its segment sizes
    (each of IRDL's accessors reads them all again: the CUDA printer's
    launches took half its time)."""
    sizes = op.properties[SEGMENTS]
    assert isinstance(sizes, DenseArrayBase)
    starts = (0, *accumulate(sizes.get_values()))
    operands = tuple(op.operands)
    shared = operands[starts[10] : starts[11]]
    return LaunchParts(
        operands[starts[1] : starts[4]],
        operands[starts[4] : starts[7]],
        shared[0] if shared else None,
        operands[starts[11] : starts[12]],
    )


class LaunchFuncOp(gpu.LaunchFuncOp):
    """`gpu.launch_func @module::@kernel blocks in (...) threads in (...)
    [dynamic_shared_memory_size %s] [args(%a : T, ...)]`."""

    name = "gpu.launch_func"

    def verify_(self) -> None:
        """IRDL's verification, shortened for the launches `of` builds: their
        segment sizes are `launch_segments`'s own array, so what is left to
        check is the sizes' types, the kernel symbol and that nothing else
        was added (IRDL reads the segment array again for each of the 13
        operand groups: half the verification of a lowered model)."""
        sizes = self.properties.get(SEGMENTS)
        count = len(self.operands) - 6
        if (
            count >= 0
            and sizes is launch_segments(count)
            and len(self.properties) == 2
            and isinstance(self.properties.get("kernel"), SymbolRefAttr)
            and not self.results
            and not self.regions
            and not self.successors
            and all(
                isinstance(v.type, IndexType) or v.type in (i32, i64)
                for v in self.operands[:6]
            )
        ):
            return
        super().verify_()

    @classmethod
    def of(
        cls,
        kernel: SymbolRefAttr,
        grid: Sequence[SSAValue],
        block: Sequence[SSAValue],
        args: Sequence[SSAValue],
    ) -> LaunchFuncOp:
        """The synchronous launch of `kernel` on `grid` x `block` with
        `args` (no clusters, dynamic shared memory or dependencies), built
        directly: a model's lowering makes thousands, and the generic
        constructor (IRDL's grouping of the operands, a new segment-size
        array each time) cost six times as much."""
        assert len(grid) == 3 and len(block) == 3
        return cls.create(
            operands=[*grid, *block, *args],
            properties={"kernel": kernel, SEGMENTS: launch_segments(len(args))},
        )

    def print(self, printer: Printer) -> None:
        if self.asyncToken is not None:
            printer.print_string(" async")
        if self.asyncDependencies:
            printer.print_string(" [")
            printer.print_list(self.asyncDependencies, printer.print_operand)
            printer.print_string("]")
        printer.print_string("  ")
        printer.print_attribute(self.kernel)
        if self.clusterSizeX is not None:
            self._print_sizes(
                printer,
                "clusters",
                (self.clusterSizeX, self.clusterSizeY, self.clusterSizeZ),
            )
        self._print_sizes(
            printer, "blocks", (self.gridSizeX, self.gridSizeY, self.gridSizeZ)
        )
        self._print_sizes(
            printer, "threads", (self.blockSizeX, self.blockSizeY, self.blockSizeZ)
        )
        if self.dynamicSharedMemorySize is not None:
            printer.print_string(" dynamic_shared_memory_size ")
            printer.print_operand(self.dynamicSharedMemorySize)
        if self.kernelOperands:
            printer.print_string("  args(")
            for i, arg in enumerate(self.kernelOperands):
                if i:
                    printer.print_string(", ")
                printer.print_operand(arg)
                printer.print_string(" : ")
                printer.print_attribute(arg.type)
            printer.print_string(")")
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=("kernel", "operandSegmentSizes")
        )

    @staticmethod
    def _print_sizes(
        printer: Printer, keyword: str, sizes: Sequence[SSAValue | None]
    ) -> None:
        printer.print_string(f" {keyword} in (")
        printer.print_list([s for s in sizes if s is not None], printer.print_operand)
        printer.print_string(")")
        types = {s.type for s in sizes if s is not None}
        if types != {IndexType()}:
            printer.print_string(" : ")
            printer.print_attribute(next(iter(types)))

    @classmethod
    def parse(cls, parser: Parser) -> LaunchFuncOp:
        async_launch = parser.parse_optional_keyword("async") is not None
        dependencies: list[SSAValue] = []
        if parser.parse_optional_punctuation("[") is not None:
            if parser.parse_optional_punctuation("]") is None:
                dependencies = parser.parse_comma_separated_list(
                    Parser.Delimiter.NONE, parser.parse_operand
                )
                parser.parse_punctuation("]")
        kernel = parser.parse_attribute()
        if not isinstance(kernel, SymbolRefAttr):
            parser.raise_error("expected the kernel's symbol (@module::@kernel)")
        clusters = None
        if parser.parse_optional_keyword("clusters") is not None:
            clusters = cls._parse_sizes(parser)
        parser.parse_keyword("blocks")
        grid = cls._parse_sizes(parser)
        parser.parse_keyword("threads")
        block = cls._parse_sizes(parser)
        shared = None
        if parser.parse_optional_keyword("dynamic_shared_memory_size") is not None:
            shared = parser.parse_operand()
        args: list[SSAValue] = []
        if parser.parse_optional_keyword("args") is not None:

            def parse_arg() -> SSAValue:
                unresolved = parser.parse_unresolved_operand()
                parser.parse_punctuation(":")
                return parser.resolve_operand(unresolved, parser.parse_type())

            args = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_arg)
        attributes = parser.parse_optional_attr_dict()
        op = cls(
            kernel,
            grid,
            block,
            clusters,
            args,
            async_launch=async_launch,
            asyncDependencies=dependencies,
            dynamicSharedMemorySize=shared,
        )
        op.attributes |= attributes
        return op

    @staticmethod
    def _parse_sizes(parser: Parser) -> list[SSAValue]:
        parser.parse_keyword("in")
        names = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        size_type: Attribute = IndexType()
        if parser.parse_optional_punctuation(":") is not None:
            size_type = parser.parse_type()
        return [parser.resolve_operand(n, size_type) for n in names]


class DimensionSyntax(Operation):
    """`gpu.thread_id x` and its kin: the dimension as a bare keyword."""

    def print(self, printer: Printer) -> None:
        dimension = self.properties["dimension"]
        assert isinstance(dimension, gpu.DimensionAttr)
        printer.print_string(f"  {dimension.data}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> Operation:
        dimension = parser.parse_keyword_in(("x", "y", "z"))  # pyright: ignore
        attributes = parser.parse_optional_attr_dict()
        op = cls.build(  # pyright: ignore[reportAttributeAccessIssue]
            properties={"dimension": gpu.DimensionAttr(gpu.DimensionEnum(dimension))},
            result_types=[IndexType()],
        )
        op.attributes |= attributes
        return op


class ThreadIdOp(DimensionSyntax, gpu.ThreadIdOp):
    name = "gpu.thread_id"


class BlockIdOp(DimensionSyntax, gpu.BlockIdOp):
    name = "gpu.block_id"


class BlockDimOp(DimensionSyntax, gpu.BlockDimOp):
    name = "gpu.block_dim"


class GridDimOp(DimensionSyntax, gpu.GridDimOp):
    name = "gpu.grid_dim"


class GlobalIdOp(DimensionSyntax, gpu.GlobalIdOp):
    name = "gpu.global_id"


class BarrierOp(gpu.BarrierOp):
    """`gpu.barrier`."""

    name = "gpu.barrier"

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> BarrierOp:
        op = cls()
        op.attributes |= parser.parse_optional_attr_dict()
        return op


class ReturnOp(gpu.ReturnOp):
    """`gpu.return [%v, ... : T, ...]`."""

    name = "gpu.return"

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        if self.args:
            printer.print_string(" ")
            printer.print_list(self.args, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([a.type for a in self.args], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> ReturnOp:
        attributes = parser.parse_optional_attr_dict()
        names = (
            parser.parse_optional_undelimited_comma_separated_list(
                parser.parse_optional_unresolved_operand,
                parser.parse_unresolved_operand,
            )
            or []
        )
        values: list[SSAValue] = []
        if names:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(
                Parser.Delimiter.NONE, parser.parse_type
            )
            values = list(parser.resolve_operands(names, types, parser.pos))
        op = cls(values)
        op.attributes |= attributes
        return op


REPLACED: dict[str, type[Operation]] = {
    op.name: op
    for op in (
        ModuleOp,
        FuncOp,
        LaunchFuncOp,
        ThreadIdOp,
        BlockIdOp,
        BlockDimOp,
        GridDimOp,
        GlobalIdOp,
        BarrierOp,
        ReturnOp,
    )
}

GPU = Dialect(
    "gpu",
    [REPLACED.get(op.name, op) for op in gpu.GPU.operations],
    [*gpu.GPU.attributes, AddressSpaceAttr],
)
"""xDSL's `gpu` dialect, with MLIR's syntax for module, func and launch_func."""

__all__ = [
    "GPU",
    "KERNEL_ATTR",
    "WORKGROUP",
    "AddressSpace",
    "AddressSpaceAttr",
    "BarrierOp",
    "BlockDimOp",
    "BlockIdOp",
    "DimensionAttr",
    "DimensionEnum",
    "FuncOp",
    "GlobalIdOp",
    "GridDimOp",
    "LaunchFuncOp",
    "LaunchParts",
    "ModuleOp",
    "ReturnOp",
    "ThreadIdOp",
    "is_kernel",
    "launch_parts",
    "workgroup_memref",
]
