"""What the default schedule achieves on the paper's workloads, per rank.

For every example, the costs of each stage before and after `coco-optimize`
on N ranks, read off the IR by `coconet_ir.analysis`: bytes sent to other ranks,
elementwise elements computed, matmul FLOPs, collectives issued. These are
exact counts from the program, not timings.

    python benchmarks/schedule_costs.py [--world 8] [--markdown]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import coconet_ir as cc
from coconet_ir.analysis.costs import Costs, module_costs

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WORKLOADS = (
    "sgd",
    "adam",
    "lamb",
    "megatron",
    "pipeline",
    "sequence_parallel",
    "matmul_reduce_scatter",
    "dlrm_embedding",
    "gemv_allreduce",
    "moe_gemm_a2a",
    "sequence_parallel_mlp",
)


def rows(world: int) -> list[tuple[str, str, Costs, Costs]]:
    table: list[tuple[str, str, Costs, Costs]] = []
    for name in WORKLOADS:
        before = cc.parse_file(str(EXAMPLES / f"{name}.mlir"))
        after = cc.Pipeline("coco-optimize")(before)
        costs_after = module_costs(after.ops, world)
        for stage, cost in module_costs(before.ops, world).items():
            table.append((name, stage, cost, costs_after[stage]))
    return table


def table_lines(world: int) -> list[str]:
    """The markdown table (docs/passes.md shows it for 8 ranks)."""
    lines = [
        "| workload | stage | bytes sent | elementwise elements | matmul FLOPs |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, stage, b, a in rows(world):
        lines.append(
            f"| {name} | @{stage} | {b.bytes_sent} → {a.bytes_sent} | "
            f"{b.elementwise_elements} → {a.elementwise_elements} | "
            f"{b.matmul_flops} → {a.matmul_flops} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=8)
    args = parser.parse_args()
    print(f"per-rank costs on {args.world} ranks, before → after coco-optimize\n")
    print("\n".join(table_lines(args.world)))


if __name__ == "__main__":
    main()
