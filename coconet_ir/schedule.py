"""CoCoNet's schedule API: transformations applied to the values a user holds.

```python
import coconet_ir as cc

@cc.function
def adam(g: ..., w: ..., m: ..., v: ..., lr: ...):
    avg = cc.all_reduce(g, name="avg")
    ...

sched = cc.Schedule(adam)
rs, ag = sched.split("avg")          # all_reduce -> reduce_scatter + all_gather
sched.reorder(ag)                    # the update runs on slices
sched.slice_state("m")               # m and v stay sliced (ZeRO)
sched.slice_state(adam.arg("v"))
fused = sched.fuse(rs)               # one kernel: rs + update + ag
print(cc.to_text(sched.module))
```

(docs/python-api.md, "Schedules: cc.Schedule", has it whole and runnable.)

A schedule owns a copy of the program. Each call runs one targeted pass
(`op=NAME`) on it, so a step whose precondition fails raises a CocoError saying
which, and leaves the program as it was. Ops are addressed by their label (the
`name` attribute); a DSL value without one gets a generated label the first
time a schedule needs it. Every call returns `Handle`s to the ops it created.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from coconet_ir import ir
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import label_of
from coconet_ir.dsl import Function, Value, module
from coconet_ir.passes.base import move_contents


@dataclass(frozen=True)
class Handle:
    """An op of the scheduled program, by its `name` attribute."""

    name: str

    def __str__(self) -> str:
        return self.name


Target = Value | Handle | str


class Schedule:
    """Apply CoCoNet's transformations step by step to a program."""

    def __init__(self, *program: Function | ModuleOp):
        if len(program) == 1 and isinstance(program[0], ModuleOp):
            self.module = program[0].clone()
            self._ops: dict[int, Operation] = {}
            self._args: dict[int, tuple[str, int]] = {}
        else:
            functions = [p for p in program if isinstance(p, Function)]
            if len(functions) != len(program) or not functions:
                raise ir.CocoError(
                    "a Schedule takes one module or @cc.function programs"
                )
            self.module = module(*functions)
            self._ops, self._args = _correspondence(functions, self.module)
        self._fresh = count()
        self._known = {n for op in self.module.walk() if (n := label_of(op))}
        """Every op name the program has had (handles may outlive their op)."""

    # -- the transformations -------------------------------------------------

    def split(
        self, all_reduce: Target, dim: int | None = None
    ) -> tuple[Handle, Handle]:
        """all_reduce → reduce_scatter + all_gather; returns both."""
        from coconet_ir.passes.split_all_reduce import SplitAllReduce

        with self._step():
            name = self._name_of(all_reduce)
            self._apply(SplitAllReduce(op=name, dim=dim))
        return Handle(f"{name}_rs"), Handle(f"{name}_ag")

    def reorder(
        self, all_gather: Target, computations: list[Target] | None = None
    ) -> Handle:
        """Move the elementwise computations after `all_gather` onto slices.

        Without `computations`, everything that can move does (`coco-reorder
        {op=...}`). With them (CoCoNet's `reorder(ag, {stages})`), exactly
        those move, with the unnamed ops between the all_gather and them and
        the replicated producers only they read (`coco-reorder{ops=...}`);
        a computation that cannot move is refused by name."""
        from coconet_ir.passes.reorder import Reorder

        with self._step():
            name = self._name_of(all_gather)
            wanted = [self._name_of(c) for c in computations or []]
            downstream = _users_of(self._find(name))
            for computation in wanted:
                if self._find(computation) not in downstream:
                    raise ir.CocoError(
                        f"reorder: '{computation}' does not use the all_gather '{name}'"
                    )
            if wanted:
                self._apply(Reorder(ops=(name, *wanted)))
            else:
                self._apply(Reorder(op=name))
            for computation in wanted:
                op = self._find(computation)
                if any(isinstance(o.owner, coco.AllGatherOp) for o in op.operands):
                    raise ir.CocoError(
                        f"reorder: '{op.name}' named '{computation}' still runs "
                        "after the all_gather"
                    )
        return Handle(name)

    def slice_state(self, param: Value | BlockArgument | Handle | str) -> None:
        """Keep a parameter that is only used through its slices sliced; `param`
        is the parameter: its name, its DSL value or `Function.arg(name)`."""
        from coconet_ir.passes.slice_state import SliceState

        with self._step():
            self._apply(SliceState(op=self._update_name(param)))

    def fuse(
        self, reduce_scatter: Target | list[Target] | tuple[Target, ...], *ops: Target
    ) -> Handle:
        """Fuse reduce_scatter + the computations on its slices + all_gather (or
        send) into one kernel region; CoCoNet spells it `fuse(rs, ..., ag)`.

        Each of `ops` that is still in the program must end up in the region
        (one that an earlier step replaced, like the all_gather `reorder`
        moved, has nothing left to check).

        Given a list of stages instead (`sched.fuse([rs, m1, v1, r, w1, ag])`),
        the region holds exactly them, every op on a path between two of
        them and the producers only they read (`coco-fuse{ops=...}`), or the
        step refuses naming the op that prevents one region."""
        from coconet_ir.passes.fuse import Fuse

        with self._step():
            if isinstance(reduce_scatter, list | tuple):
                if ops:
                    raise ir.CocoError("fuse takes a list of stages or ops, not both")
                names = [self._name_of(t) for t in reduce_scatter]
                if not names:
                    raise ir.CocoError("fuse: the list of stages is empty")
                self._apply(Fuse(ops=tuple(names)))
                self._check_inside(names, coco.FusionOp)
                region = self._find(names[0]).parent_op()
                assert isinstance(region, coco.FusionOp)
                return Handle(self._ensure_name(region))
            name = self._name_of(reduce_scatter)
            inside = self._names_in_program(ops)
            self._apply(Fuse(op=name))
            self._check_inside(inside, coco.FusionOp)
        return Handle(f"{name}_fused")

    def overlap(
        self,
        matmul: Target,
        *consumers: Target,
        chunks: int = 4,
        dim: int | None = None,
    ) -> Handle:
        """Run `matmul` and the collectives consuming it (`consumers`, which
        must end up in the region) chunk by chunk."""
        from coconet_ir.passes.overlap import Overlap

        with self._step():
            name = self._name_of(matmul)
            inside = self._names_in_program(consumers)
            self._apply(Overlap(op=name, chunks=chunks, dim=dim))
            self._check_inside(inside, coco.OverlapOp)
        return Handle(f"{name}_overlap")

    def per_peer(self, matmul: Target) -> Handle:
        """Decompose `matmul`, the all_gather feeding it and the chain ending
        in a reduce_scatter one chunk per rank (`coco-overlap{per_peer=true}`):
        the collectives become the region's gathered inputs and scattered
        outputs."""
        from coconet_ir.passes.overlap import Overlap

        with self._step():
            name = self._name_of(matmul)
            self._apply(Overlap(op=name, per_peer=True))
        return Handle(f"{name}_per_peer")

    def fuse_send(self, send: Target) -> None:
        """Send the slice instead of the gathered tensor; the receiver gathers."""
        from coconet_ir.passes.fuse_send import FuseSend

        with self._step():
            self._apply(FuseSend(op=self._name_of(send)))

    def apply(self, pipeline: str | list[ModulePass | str]) -> None:
        """Run any pass pipeline on the scheduled program."""
        from coconet_ir.pipeline import Pipeline

        with self._step():
            Pipeline(pipeline).apply(self.module)

    # -- naming ----------------------------------------------------------------

    @contextmanager
    def _step(self) -> Iterator[None]:
        """Run one step (naming the ops it targets, its pass, its checks) on a
        copy of the program, and keep the copy only if the step succeeds: a
        step that raises leaves the program, and the labels it holds, as they
        were. The copy's ops move into `self.module`, which stays the same
        object."""
        program, ops = self.module, self._ops
        trial = program.clone()
        copies = dict(zip(program.walk(), trial.walk(), strict=True))
        self.module = trial
        self._ops = {key: copies[op] for key, op in ops.items() if op in copies}
        try:
            yield
            ir.verify(trial)
        except BaseException as err:
            self.module, self._ops = program, ops
            if isinstance(err, ir.CocoError) and hasattr(err, "__notes__"):
                del err.__notes__  # xDSL appends a dump of the whole module
            raise
        move_contents(program, trial)
        self.module = program
        self._known.update(n for op in self.module.walk() if (n := label_of(op)))

    def _apply(self, transformation: ModulePass) -> None:
        transformation.apply(ir.make_context(), self.module)

    def _names_in_program(self, targets: Sequence[Target]) -> list[str]:
        """The labels of `targets`; each must be one the program has had."""
        names = [self._name_of(t) for t in targets]
        for name in names:
            if name not in self._known:
                raise ir.CocoError(f"no op named '{name}' in the program")
        return names

    def _check_inside(self, names: Sequence[str], region: type[Operation]) -> None:
        """Every op labelled one of `names` still in the program sits in a
        `region`."""
        for name in names:
            op = next((o for o in self.module.walk() if label_of(o) == name), None)
            if op is not None and not _within(op, region):
                raise ir.CocoError(f"'{op.name}' named '{name}' is not in the region")

    def _name_of(self, target: Target) -> str:
        if isinstance(target, Handle | str):
            return str(target)
        if not isinstance(target, Value):
            raise ir.CocoError(f"{target!r} is not an op of the program")
        original = _defining_op(target)
        op = self._ops.get(id(original))
        if op is not None:
            return self._ensure_name(op)
        # A step rebuilt the op (reorder puts it on slices): the rebuilt one
        # keeps the label the program gave it.
        label = None if original is None else label_of(original)
        if label is not None and label in self._known:
            return label
        raise ir.CocoError(f"{target!r} is not a value of the scheduled program")

    def _ensure_name(self, op: Operation) -> str:
        name = label_of(op)
        if name is None:
            taken = {label_of(o) for o in self.module.walk()}
            name = next(n for n in (f"s{i}" for i in self._fresh) if n not in taken)
            op.attributes["name"] = StringAttr(name)
            self._known.add(name)
        return name

    def _update_name(self, param: Value | BlockArgument | Handle | str) -> str:
        if isinstance(param, Handle):
            return param.name
        if isinstance(param, str):
            arg = self._argument_named(param)
        else:
            arg = self._argument(param.ssa if isinstance(param, Value) else param)
        updates = [
            u.operation for u in arg.uses if isinstance(u.operation, coco.UpdateOp)
        ]
        if not updates:
            raise ir.CocoError(
                f"slice_state: parameter %{arg.name_hint or arg.index} is "
                "never updated by coco.update"
            )
        return self._ensure_name(updates[0])

    def _argument_named(self, name: str) -> BlockArgument:
        """The one parameter called `name` (as written in the program)."""
        found = [
            arg
            for func in self.module.ops
            if isinstance(func, FuncOp)
            for arg in func.body.block.args
            if arg.name_hint == name
        ]
        if len(found) != 1:
            raise ir.CocoError(
                f"slice_state: {len(found)} parameters are named '{name}'"
            )
        return found[0]

    def _argument(self, ssa: SSAValue) -> BlockArgument:
        """The scheduled program's argument for a DSL parameter, looked up by
        (function, position) since passes may replace arguments."""
        if id(ssa) in self._args:
            func_name, index = self._args[id(ssa)]
            for func in self.module.ops:
                if isinstance(func, FuncOp) and func.sym_name.data == func_name:
                    return func.body.block.args[index]
        arguments = (
            arg
            for func in self.module.ops
            if isinstance(func, FuncOp)
            for arg in func.body.block.args
        )
        if any(ssa is arg for arg in arguments):
            assert isinstance(ssa, BlockArgument)
            return ssa
        raise ir.CocoError("slice_state takes a parameter of the program")

    def _find(self, name: str) -> Operation:
        for op in self.module.walk():
            if label_of(op) == name:
                return op
        raise ir.CocoError(f"no op named '{name}' in the scheduled program")


def _users_of(op: Operation) -> set[Operation]:
    """Every op that (transitively) uses a result of `op`."""
    found: set[Operation] = set()
    pending = [op]
    while pending:
        for result in pending.pop().results:
            for use in result.uses:
                if use.operation not in found:
                    found.add(use.operation)
                    pending.append(use.operation)
    return found


def _within(op: Operation, region: type[Operation]) -> bool:
    return coco.ancestor(op, region) is not None


def _defining_op(target: Value) -> Operation | None:
    ssa: SSAValue = target.ssa
    return ssa.owner if isinstance(ssa.owner, Operation) else None


def _correspondence(
    functions: list[Function], scheduled: ModuleOp
) -> tuple[dict[int, Operation], dict[int, tuple[str, int]]]:
    """Map each op of the DSL functions to its copy in `scheduled` (a clone: the
    walks visit corresponding ops in the same order), and each argument to its
    (function, position)."""
    ops: dict[int, Operation] = {}
    args: dict[int, tuple[str, int]] = {}
    copies: Iterator[Operation] = iter(scheduled.ops)
    for function in functions:
        copy = next(copies)
        assert isinstance(copy, FuncOp)
        for original, cloned in zip(function.func_op.walk(), copy.walk(), strict=True):
            ops[id(original)] = cloned
        for original in function.func_op.body.block.args:
            args[id(original)] = (copy.sym_name.data, original.index)
    return ops, args
