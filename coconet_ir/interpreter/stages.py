"""Which functions a run executes, and the checks that need the world size.

COCO_DIALECT.md section 5: functions that exchange tensors with `coco.send` /
`coco.recv` form a pipeline, one stage per function. A run executes one
connected group of functions: the only function of a module, the whole pipeline
when all functions are connected, or the group of an explicit `entry`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation

from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType
from coconet_ir.ir import CocoError, location_of, op_error


def module_functions(module: ModuleOp) -> list[FuncOp]:
    """The module's functions, in module order."""
    return [op for op in module.ops if isinstance(op, FuncOp)]


def pipeline_graph(functions: Iterable[FuncOp]) -> nx.Graph:
    """Functions as nodes (by name), an edge for every send/recv between two."""
    graph = nx.Graph()
    for func in functions:
        graph.add_node(func.sym_name.data)
        for op in func.walk():
            if isinstance(op, coco.SendOp | coco.RecvOp):
                graph.add_edge(func.sym_name.data, op.stage.root_reference.data)
    return graph


def select_functions(module: ModuleOp, entry: str | None) -> list[FuncOp]:
    """The functions a run executes, in module order (see the module docstring)."""
    functions = module_functions(module)
    if not functions:
        raise CocoError("the module has no func.func to run")
    names = [f.sym_name.data for f in functions]
    graph = pipeline_graph(functions)
    if entry is not None:
        if entry not in names:
            raise CocoError(
                f"entry function @{entry} is not in the module (functions: "
                f"{', '.join('@' + n for n in names)})"
            )
        group = nx.node_connected_component(graph, entry)
    else:
        groups = list(nx.connected_components(graph))
        if len(groups) > 1:
            raise CocoError(
                f"the module has {len(groups)} unconnected groups of functions "
                f"({', '.join('@' + n for n in names)}); choose one with an entry "
                "function (entry=... / --entry)"
            )
        group = groups[0]
    selected = [f for f in functions if f.sym_name.data in group]
    for func in selected:
        check_runnable(func)
    return selected


def check_world_attribute(module: ModuleOp, world: int) -> None:
    """A module fixed to a world size (`coco.world_size = N`) runs only on N."""
    attr = module.attributes.get("coco.world_size")
    if isinstance(attr, IntegerAttr) and attr.value.data != world:
        raise CocoError(
            f"the module is fixed to coco.world_size = {attr.value.data} but is run "
            f"on {world} ranks"
        )


def check_runnable(func: FuncOp) -> None:
    """A function the interpreter can step through: one block, tensor arguments."""
    if not func.body.blocks:
        raise op_error(func, f"@{func.sym_name.data} has no body to run")
    if len(func.body.blocks) != 1:
        raise op_error(
            func, f"@{func.sym_name.data} has several blocks; only one is supported"
        )
    for index, arg in enumerate(func.body.block.args):
        if not isinstance(arg.type, TensorType):
            raise op_error(
                func,
                f"argument {index} of @{func.sym_name.data} must be a !coco.tensor, "
                f"got {arg.type}",
            )


def check_divisible(functions: Iterable[FuncOp], world: int) -> None:
    """Every sliced type of the run (arguments, block arguments, op results)
    must have its sliced dimension divisible by the world size."""
    for func in functions:
        for op in func.walk():
            types: list[Attribute] = [r.type for r in op.results]
            for region in op.regions:
                for block in region.blocks:
                    types.extend(a.type for a in block.args)
            for tensor_type in types:
                check_type_divisible(op, tensor_type, world)


def check_type_divisible(op: Operation, tensor_type: Attribute, world: int) -> None:
    if not isinstance(tensor_type, TensorType) or not tensor_type.layout.is_sliced:
        return
    dim = tensor_type.layout.sliced_dim
    size = tensor_type.dims[dim]
    if size % world:
        raise op_error(
            op,
            f"dimension {dim} of {tensor_type} (size {size}) is not divisible by "
            f"the world size {world}",
        )


def check_rules(
    functions: Iterable[FuncOp], rules: Mapping[type[Operation], Any]
) -> None:
    """Every op of the run must have an interpreter rule."""
    for func in functions:
        for op in func.walk():
            if op is func or (isinstance(op, ReturnOp) and op.parent_op() is func):
                continue
            if type(op) not in rules:
                raise op_error(op, "has no rule in the reference interpreter")


def describe(op: Operation) -> str:
    """`'coco.recv' from @a channel 0 at FILE:LINE:COL` for messages."""
    if isinstance(op, coco.RecvOp):
        return (
            f"'{op.name}' from @{op.stage.root_reference.data} channel "
            f"{op.channel.value.data} at {location_of(op)}"
        )
    return f"'{op.name}' at {location_of(op)}"
