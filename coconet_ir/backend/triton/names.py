"""Python names in the printed module (docs/triton.md, "The triton target")."""

from __future__ import annotations

import keyword
import re

RESERVED = frozenset(
    {
        *(
            "os",
            "torch",
            "ct",
            "triton",
            "tl",
            "cl",
            "world",
            "tanh",
            "pow_",
            "to_bf16",
        ),
        *("INDEX_FAULTS", "INTERPRETED", "UPCAST", "SYMMETRIC_BYTES", "SIGNAL_SLOTS"),
    }
)
"""Names the generated module's globals and host functions take (`HEADER`,
`emit_triton`)."""


def identifier(hint: str | None, fallback: str = "v") -> str:
    """A Python identifier from an SSA name hint or a symbol."""
    name = re.sub(r"\W", "_", hint or "") or fallback
    if name[0].isdigit():
        name = f"v{name}"
    if keyword.iskeyword(name) or name in RESERVED:
        name = f"{name}_"
    return name
