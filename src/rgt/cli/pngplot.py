"""`rgt plot --png`: the same series as a PNG, drawn by matplotlib (the `plot` extra).

A picture to keep or share needs real type, axes and tick labels; matplotlib draws those well
and is what most training setups already have. It stays an extra so the base install stays
light (the terminal chart needs nothing), and its absence is one line saying what to install.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from rgt.errors import UserError
from rgt.lifecycle.metrics import Series

INSTALL_HINT = "pip install 'rgt[plot]'"


def check(path: Path) -> None:
    """Before any work (reading the box, drawing the terminal chart): matplotlib is there and
    PATH can be written, or one line says what to do."""
    _pyplot()
    if path.suffix.lower() != ".png":
        raise UserError(f"--png {path}: give a file name ending in .png")
    if not path.parent.is_dir():
        raise UserError(f"--png {path}: the directory {path.parent} does not exist")


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed, none opened
        from matplotlib import pyplot
    except ImportError:
        raise UserError(f"--png needs matplotlib, which is not installed: {INSTALL_HINT} "
                        "(without --png the terminal chart needs nothing)") from None
    return pyplot


def write_png(data: Series, keys: list[str], path: Path, *, log_y: bool = False) -> None:
    """One panel per metric, stacked, sharing the x axis; written to a temporary name in
    PATH's directory and renamed, so PATH is whole or untouched."""
    check(path)
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(len(keys), 1, sharex=True, squeeze=False,
                                   figsize=(9, 2.6 * len(keys) + 0.6))
    for axis, key in zip((row[0] for row in axes), keys, strict=True):
        points = [(x, y) for x, y in data.series[key] if not log_y or y > 0]
        axis.plot([x for x, _ in points], [y for _, y in points], linewidth=1.2,
                  marker="o" if len(points) < 30 else None, markersize=3)
        axis.set_ylabel(key)
        if log_y and points:
            axis.set_yscale("log")
        axis.grid(True, alpha=0.3)
        if points:
            low = min(points, key=lambda p: p[1])
            axis.set_title(f"{key}: last {_num(points[-1][1])}, min {_num(low[1])} at "
                           f"{data.x_label} {_num(low[0])}", fontsize=9, loc="left")
    axes[-1][0].set_xlabel(data.x_label)
    figure.suptitle(f"{data.box} · {data.run}", fontsize=10)
    figure.tight_layout()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    try:
        figure.savefig(tmp, dpi=100)
        os.replace(tmp, path)
    finally:
        pyplot.close(figure)
        if tmp.exists():
            tmp.unlink()


def _num(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)
