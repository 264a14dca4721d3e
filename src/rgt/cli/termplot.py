"""Line charts in the terminal with Unicode braille (2 x 4 dots a cell), no dependencies.

A plot must work on the base install, over SSH, in any terminal; braille gives four times
the vertical resolution of block characters and draws a continuous line, which is what a loss
curve needs. Pure functions: a chart is a list of strings.
"""

from __future__ import annotations

import math

BRAILLE = 0x2800
# the bit of each dot in a braille cell, by (column, row) inside the cell
DOT_BITS = {(0, 0): 0x01, (0, 1): 0x02, (0, 2): 0x04, (0, 3): 0x40,
            (1, 0): 0x08, (1, 1): 0x10, (1, 2): 0x20, (1, 3): 0x80}


def number(value: float) -> str:
    """An axis label: four significant digits, short."""
    return f"{value:.4g}"


def chart(points: list[tuple[float, float]], *, width: int, height: int = 8,
          x_label: str = "step", log_y: bool = False) -> list[str]:
    """Rows of text, WIDTH characters at most: a y axis with the top and bottom values, the
    braille line through POINTS (joined point to point), and an x axis with its ends."""
    if log_y:
        points = [(x, math.log10(y)) for x, y in points if y > 0]
    if not points:
        return ["(no points to draw)"]
    ys = [y for _, y in points]
    xs = [x for x, _ in points]
    y_lo, y_hi = min(ys), max(ys)
    x_lo, x_hi = min(xs), max(xs)
    shown_hi, shown_lo = (10 ** y_hi, 10 ** y_lo) if log_y else (y_hi, y_lo)
    labels = [number(shown_hi), number(shown_lo)]
    gutter = max(len(label) for label in labels) + 1
    cols = max(4, width - gutter - 1)
    dots_w, dots_h = cols * 2, height * 4
    cells = [[0] * cols for _ in range(height)]

    def to_dot(x: float, y: float) -> tuple[int, int]:
        dx = 0 if x_hi == x_lo else round((x - x_lo) / (x_hi - x_lo) * (dots_w - 1))
        dy = (dots_h - 1) // 2 if y_hi == y_lo else \
            round((y_hi - y) / (y_hi - y_lo) * (dots_h - 1))
        return dx, dy

    def plot(dx: int, dy: int) -> None:
        cells[dy // 4][dx // 2] |= DOT_BITS[(dx % 2, dy % 4)]

    previous = None
    for x, y in sorted(points, key=lambda p: p[0]):
        here = to_dot(x, y)
        for dot in _segment(previous or here, here):
            plot(*dot)
        previous = here
    rows = []
    for i, row in enumerate(cells):
        label = labels[0] if i == 0 else labels[1] if i == height - 1 else ""
        tick = "┤" if label else "│"
        rows.append(f"{label:>{gutter}}{tick}" + "".join(chr(BRAILLE + b) for b in row))
    rows.append(" " * gutter + "└" + "─" * cols)
    left, right = number(x_lo), f"{number(x_hi)} {x_label}"
    rows.append(" " * (gutter + 1) + left + " " * max(1, cols - len(left) - len(right)) + right)
    return rows


def _segment(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """The dots of a straight line from A to B (Bresenham), both ends included."""
    (x0, y0), (x1, y1) = a, b
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err, dots = dx + dy, []
    while True:
        dots.append((x0, y0))
        if (x0, y0) == (x1, y1):
            return dots
        twice = 2 * err
        if twice >= dy:
            err += dy
            x0 += sx
        if twice <= dx:
            err += dx
            y0 += sy
