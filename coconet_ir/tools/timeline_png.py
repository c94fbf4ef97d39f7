"""A predicted timeline as a picture (coconet-bench `--png`): one horizontal
lane per stream of each function (a pipeline's stages get a pair of lanes
each), one bar per `Interval`, coloured by its kind and labelled where it is
wide enough to hold its label. A fused kernel that computes and
communicates at once (`Interval.overlapped`) is drawn as both: its upper half
in the computation's colour, its lower half in the communication's.

Needs matplotlib (`pip install -e '.[bench]'`); without it, drawing raises a
CocoError saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coconet_ir.costmodel import Interval, Prediction
from coconet_ir.costmodel.timeline import COMMUNICATION, COMPUTE
from coconet_ir.diagnostics import CocoError

COLOURS = {COMPUTE: "#4878a8", COMMUNICATION: "#e08a3c"}
"""Blue for computation, orange for communication (docs/images' palette)."""

AXIS_PIXELS = 900
"""About how wide the time axis is drawn, in pixels."""
CHARACTER_PIXELS = 6.5
"""About how wide a character of a bar's label is, in pixels."""


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend, or a CocoError."""
    try:
        import matplotlib
    except ImportError:
        raise CocoError(
            "--png draws with matplotlib, which is not installed: "
            "pip install matplotlib (or pip install -e '.[bench]')"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def lanes(predictions: dict[str, Prediction]) -> list[tuple[str, list[Interval]]]:
    """(lane name, its intervals), top to bottom: each function's streams,
    compute first; the function's name only when there are several."""
    found: list[tuple[str, list[Interval]]] = []
    for function, prediction in predictions.items():
        streams = sorted(
            {i.stream for i in prediction.timeline}, key=lambda s: s != COMPUTE
        )
        for stream in streams:
            name = f"@{function} {stream}" if len(predictions) > 1 else stream
            found.append((name, [i for i in prediction.timeline if i.stream == stream]))
    return found


def fitting_label(label: str, pixels: float) -> str | None:
    """`label`, or what follows the step of a pipeline's stage
    (`sum_per_peer[2] send partial` -> `send partial`), or its last word, if
    it fits into a bar `pixels` wide; else None."""
    for candidate in (label, label.split(" ", 1)[-1], label.rsplit(" ", 1)[-1]):
        if len(candidate) * CHARACTER_PIXELS + 4 <= pixels:
            return candidate
    return None


def draw_timeline(predictions: dict[str, Prediction], title: str, path: Path) -> None:
    """Write the timeline of `predictions` (one function's, or a pipeline's
    stages') to the PNG `path`, times in milliseconds."""
    plt = pyplot()
    rows = lanes(predictions)
    end = max((i.end for _, found in rows for i in found), default=0.0) * 1e3
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.7 * max(len(rows), 1)))
    for lane, (_, intervals) in enumerate(rows):
        y = len(rows) - 1 - lane
        for interval in intervals:
            start, width = interval.start * 1e3, interval.duration * 1e3
            # a fused kernel computes and communicates at once: both halves
            halves = (
                [(COMPUTE, 0.0), (COMMUNICATION, -0.35)]
                if interval.overlapped
                else [(interval.kind, -0.35)]
            )
            height = 0.35 if interval.overlapped else 0.7
            for kind, offset in halves:
                ax.broken_barh(
                    [(start, width)],
                    (y + offset, height),
                    facecolors=COLOURS.get(kind, "#999999"),
                    edgecolors="white",
                    linewidth=0.5,
                )
            label = fitting_label(interval.label, width / end * AXIS_PIXELS)
            if label:
                ax.text(
                    start + width / 2,
                    y,
                    label,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                    clip_on=True,
                )
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([name for name, _ in reversed(rows)])
    ax.set_xlim(0, end * 1.02 if end else 1)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("time (ms, predicted)")
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in COLOURS.values()]
    ax.legend(
        handles,
        list(COLOURS),
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=len(COLOURS),
        fontsize=8,
        frameon=False,
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
