"""Drawing helpers shared by the report's figures (matplotlib on its Agg backend: no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from trainrt.viz.report.data import Series
from trainrt.viz.video import VIZ_INSTALL_HINT

DPI = 110
RAW_ALPHA = 0.25


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend; RuntimeError with the install hint without matplotlib."""
    try:
        import matplotlib
    except ImportError as err:
        raise RuntimeError(f"trainrt report needs matplotlib: {VIZ_INSTALL_HINT}") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def grid(
    plt: Any, count: int, title: str, *, cols: int = 3, size: tuple[float, float] = (4.4, 3.0)
) -> tuple[Any, list[Any]]:
    """A figure of ``count`` panels, ``cols`` a row at most, titled ``title``; unused cells hidden."""
    cols = max(1, min(count, cols))
    rows = math.ceil(count / cols)
    figure, axes = plt.subplots(
        rows, cols, figsize=(size[0] * cols, size[1] * rows + 0.5), squeeze=False, layout="constrained"
    )
    figure.suptitle(title, fontsize=12)
    flat = [a for row in axes for a in row]
    for extra in flat[count:]:
        extra.set_visible(False)
    return figure, flat[:count]


def style(axis: Any, title: str | None = None, xlabel: str | None = None, ylabel: str | None = None) -> None:
    """Title, labels, a light grid and small tick labels."""
    if title:
        axis.set_title(title, fontsize=10)
    if xlabel:
        axis.set_xlabel(xlabel, fontsize=8)
    if ylabel:
        axis.set_ylabel(ylabel, fontsize=8)
    axis.grid(alpha=0.3)
    axis.tick_params(labelsize=7)


def trace(
    axis: Any, curve: Series, *, color: str | None = None, label: str | None = None, width: float = 1.6
) -> None:
    """``curve`` raw (faint) and smoothed (solid, labelled); one line when it has too few points to smooth."""
    if len(curve.y) < 8:
        axis.plot(curve.x, curve.y, color=color, linewidth=width, marker="o", markersize=3, label=label)
        return
    (raw,) = axis.plot(curve.x, curve.y, color=color, linewidth=0.8, alpha=RAW_ALPHA)
    axis.plot(curve.x, curve.smoothed, color=raw.get_color(), linewidth=width, label=label)


def note(axis: Any, text: str) -> None:
    """Say on an empty panel why it is empty."""
    axis.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, color="0.35", wrap=True,
              transform=axis.transAxes)  # fmt: skip
    axis.set_xticks([])
    axis.set_yticks([])


def log_scale_fits(curves: list[Series]) -> bool:
    """Whether a log y axis suits ``curves``: every value positive and spanning over two decades."""
    values = [v for c in curves for v in c.y if math.isfinite(v)]
    return bool(values) and min(values) > 0 and max(values) / min(values) > 100


def save(plt: Any, figure: Any, path: Path) -> Path:
    """Write ``figure`` to ``path`` and close it."""
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path
