"""xDSL's upstream `gpu` dialect with MLIR's syntax where xDSL's differs.

xDSL 0.74 has no custom syntax for `gpu.module`, `gpu.func` and
`gpu.launch_func` (it prints and parses only their generic form), and it marks
a kernel with a `kernel` *property* where MLIR uses the discardable attribute
`gpu.kernel` — so MLIR rejects the generic form of an xDSL kernel launch
("kernel function is missing the 'gpu.kernel' attribute") and xDSL cannot read
what mlir-opt prints. This module subclasses the three ops (same names, same
fields) with MLIR 22's custom syntax and MLIR's kernel marker, and `GPU` is
xDSL's dialect with them swapped in. `coconet-opt` and `ir.make_context` load
it in place of xDSL's (plain `xdsl-opt` keeps xDSL's own); docs/gpu.md §4.

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

from xdsl.dialects import gpu
from xdsl.dialects.builtin import (
    FunctionType,
    IndexType,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer

DimensionAttr = gpu.DimensionAttr
DimensionEnum = gpu.DimensionEnum

KERNEL_ATTR = "gpu.kernel"
"""MLIR's marker of a kernel function."""


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
    """`gpu.func @name(%a: T, ...) [kernel] [attributes {...}] { ... }`."""

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

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        block = self.body.blocks[0] if self.body.blocks else None
        printer.print_string("(")
        if block is not None:
            for i, arg in enumerate(block.args):
                if i:
                    printer.print_string(", ")
                printer.print_block_argument(arg)
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
        if is_kernel(self):
            printer.print_string(" kernel")
        printer.print_op_attributes(
            self.attributes,
            reserved_attr_names=("sym_name", KERNEL_ATTR, "workgroup_attributions"),
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
        kernel = parser.parse_optional_keyword("kernel") is not None
        attributes = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region(arguments)
        inputs = [a.type for a in arguments]
        op = cls(name, (inputs, outputs), body, kernel=kernel)
        if attributes is not None:
            op.attributes |= {
                k: v
                for k, v in attributes.data.items()
                if k != "workgroup_attributions"
            }
        return op


class LaunchFuncOp(gpu.LaunchFuncOp):
    """`gpu.launch_func @module::@kernel blocks in (...) threads in (...)
    [dynamic_shared_memory_size %s] [args(%a : T, ...)]`."""

    name = "gpu.launch_func"

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
    list(gpu.GPU.attributes),
)
"""xDSL's `gpu` dialect, with MLIR's syntax for module, func and launch_func."""

__all__ = [
    "GPU",
    "KERNEL_ATTR",
    "BarrierOp",
    "BlockDimOp",
    "BlockIdOp",
    "DimensionAttr",
    "DimensionEnum",
    "FuncOp",
    "GlobalIdOp",
    "GridDimOp",
    "LaunchFuncOp",
    "ModuleOp",
    "ReturnOp",
    "ThreadIdOp",
    "is_kernel",
]
