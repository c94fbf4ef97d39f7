"""The dialects: `coco`, its device-level `coco_gpu`, and xDSL's `gpu`,
`linalg` and `shard` with what MLIR 22 has that xDSL lacks."""

from collections.abc import Sequence

from xdsl.ir import Attribute, Dialect, Operation


def with_added(
    dialect: Dialect,
    operations: Sequence[type[Operation]],
    attributes: Sequence[type[Attribute]] = (),
) -> Dialect:
    """xDSL's `dialect` with MLIR's `operations` and `attributes` it lacks."""
    return Dialect(
        dialect.name,
        [*dialect.operations, *operations],
        [*dialect.attributes, *attributes],
    )
