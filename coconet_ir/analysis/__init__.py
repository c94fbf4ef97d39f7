"""Analyses of coco IR that the passes, the interpreter and the lowering share,
each computed once per module or region:

- `channels`: which send feeds which recv, and the stages of a pipeline;
- `chunks`: the chunk dim of every value of a chunked (overlap) region;
- `costs`: per-rank bytes communicated, elementwise work and matmul FLOPs.

Analyses import the dialect, never a pass, the interpreter or the lowering
(docs/architecture.md).
"""
