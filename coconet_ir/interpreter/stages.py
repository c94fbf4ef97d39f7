"""Which functions a run executes, and the checks that need the world size.

docs/dialect.md, "Pipelines: send and recv": functions that exchange tensors
with `coco.send` / `coco.recv` form a pipeline, one stage per function. A run
executes one connected group of functions: the only function of a module, the
whole pipeline when all functions are connected, or the group of an explicit
`entry`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, BlockArgument, Operation

from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.diagnostics import CocoError, location_of
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import (
    TensorType,
    divisibility_problem,
)
from coconet_ir.ir import argument_location, declared_world_size, describe_argument


def module_functions(module: ModuleOp) -> list[FuncOp]:
    """The module's functions, in module order."""
    return [op for op in module.ops if isinstance(op, FuncOp)]


def select_functions(
    module: ModuleOp, entry: str | None, channels: PipelineChannels | None = None
) -> list[FuncOp]:
    """The functions a run executes, in module order (see the module docstring);
    `channels`, the module's pipeline channels if already known."""
    functions = module_functions(module)
    if not functions:
        raise CocoError("the module has no func.func to run")
    names = [f.sym_name.data for f in functions]
    graph = (channels or PipelineChannels.of(module)).stages()
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
    fixed = declared_world_size(module)
    if fixed is not None and fixed != world:
        raise CocoError(
            f"the module is fixed to coco.world_size = {fixed} but is run "
            f"on {world} ranks"
        )


def check_runnable(func: FuncOp) -> None:
    """A function the interpreter can step through: one block, tensor arguments."""
    if not func.body.blocks:
        raise CocoError(f"@{func.sym_name.data} has no body to run", func)
    if len(func.body.blocks) != 1:
        raise CocoError(
            f"@{func.sym_name.data} has several blocks; only one is supported", func
        )
    for index, arg in enumerate(func.body.block.args):
        if not isinstance(arg.type, TensorType):
            raise CocoError(
                f"argument {index} of @{func.sym_name.data} must be a !coco.tensor, "
                f"got {arg.type}",
                func,
            )


def check_divisible(functions: Iterable[FuncOp], world: int) -> None:
    """Every sliced type of the run (arguments, block arguments, op results)
    must have its sliced dimension divisible by the world size; the error
    points at the argument or the op."""
    for func in functions:
        for op in func.walk():
            for result in op.results:
                check_type_divisible(op, result.type, world)
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        check_type_divisible(arg, arg.type, world)


def check_type_divisible(
    where: Operation | BlockArgument, tensor_type: Attribute, world: int
) -> None:
    problem = divisibility_problem(tensor_type, world)
    if problem is None:
        return
    if isinstance(where, Operation):
        raise CocoError(problem, where)
    raise CocoError(f"{describe_argument(where)}: {problem}", argument_location(where))


def check_rules(
    functions: Iterable[FuncOp], rules: Mapping[type[Operation], Any]
) -> None:
    """Every op of the run must have an interpreter rule."""
    for func in functions:
        for op in func.walk():
            if op is func or (isinstance(op, ReturnOp) and op.parent_op() is func):
                continue
            if type(op) not in rules:
                raise CocoError("has no rule in the reference interpreter", op)


def describe(op: Operation) -> str:
    """`'coco.recv' from @a channel 0 at FILE:LINE:COL` for messages."""
    if isinstance(op, coco.RecvOp):
        return (
            f"'{op.name}' from @{op.stage.root_reference.data} channel "
            f"{op.channel.value.data} at {location_of(op)}"
        )
    return f"'{op.name}' at {location_of(op)}"
