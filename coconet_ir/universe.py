"""What coconet-ir adds to xDSL: the coco dialect and its passes.

Registration is lazy (name → getter), as xDSL's own `get_all_dialects` and
`get_all_passes` are, so that start-up only imports what a run uses. The
`xdsl.universe` entry point in pyproject.toml points here, so plain `xdsl-opt`
and `xdsl-gui` know coco too.
"""

from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe


def get_coco() -> Dialect:
    from coconet_ir.dialects.coco import Coco

    return Coco


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    return {"coco": get_coco}


def get_split_all_reduce() -> type[ModulePass]:
    from coconet_ir.passes.split_all_reduce import SplitAllReduce

    return SplitAllReduce


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {"coco-split-all-reduce": get_split_all_reduce}


COCONET_UNIVERSE = Universe(
    all_dialects=get_all_dialects(),
    all_passes=get_all_passes(),
)
