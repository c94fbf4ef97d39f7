"""C expressions and the names of one C function: what the CUDA printer and
its vectorizer (`vectorize.py`, a helper the printer calls) share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

C_RESERVED = frozenset(
    """auto bool break case char const continue default do double else enum
    extern float for goto if inline int long register restrict return short
    signed sizeof static struct switch typedef union unsigned void volatile while
    class delete new this template typename namespace operator private public
    true false nullptr ctx dim3 threadIdx blockIdx blockDim gridDim warpSize
    coco std main half nv_bfloat16 float2 float4 int2 int4 uint2 uint4 size_t
    int32_t int64_t uint32_t uint64_t""".split()
)


def sanitize(hint: str | None, fallback: str) -> str:
    """A C identifier from an SSA name hint."""
    name = re.sub(r"\W", "_", hint or "") or fallback
    if name[0].isdigit():
        name = f"v{name}"
    if name in C_RESERVED or name.startswith("__"):
        name = f"{name}_"
    return name


@dataclass
class Expr:
    """A C expression and whether it needs no parentheses as an operand."""

    text: str
    atomic: bool = False

    def operand(self) -> str:
        return self.text if self.atomic else f"({self.text})"


@dataclass
class Scope:
    """The names of one C function."""

    used: set[str] = field(default_factory=set[str])
    tried: dict[str, int] = field(default_factory=dict[str, int])
    """Each base name → the last suffix tried for it (so that a name used
    thousands of times costs no more than once)."""

    def fresh(self, hint: str | None, fallback: str) -> str:
        base = sanitize(hint, fallback)
        name, n = base, self.tried.get(base, 0)
        if n:
            name = f"{base}_{n}"
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.tried[base] = n
        self.used.add(name)
        return name
