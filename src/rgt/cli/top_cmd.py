"""Many runs at once: `rgt top`, a live table of boxes and runs, and `rgt plot`, the metrics
a run logged, drawn in the terminal or to a PNG."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.text import Text

from rgt.cli import app, termplot
from rgt.cli.args import BoxArg
from rgt.cli.console import console, duration, err_console, escape, print_json, safe_text
from rgt.errors import UserError
from rgt.lifecycle import top as top_mod
from rgt.lifecycle.money import IDLE_WARNING_S
from rgt.store import LIVE, Store

if TYPE_CHECKING:
    from rgt.lifecycle.metrics import Series

STATUS_STYLE = {"succeeded": "green", "running": "cyan", "starting": "cyan",
                "paused": "yellow", "resuming": "yellow", "stopped": "yellow",
                "cancelled": "yellow"}


@app.command()
def top(
    interval: Annotated[float, typer.Option(
        "--interval", "-n", min=0.5, help="Seconds between asking the boxes (clocks tick "
                                          "every second regardless).")] = 5.0,
    once: Annotated[bool, typer.Option("--once", help="Ask once, print one table, exit.")
                    ] = False,
    all_boxes: Annotated[bool, typer.Option("--all", "-a", help="Include boxes that are down.")
                         ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --once: one JSON document "
                                                         "on stdout.")] = False,
) -> None:
    """A live table of every box and run: money, clocks, step, loss, ETA. Ctrl-C quits.

    The runs shown: every live run, and ended runs until they are pulled (and for a while
    after). The boxes are asked every --interval seconds, all at once; nothing is changed.
    Printed to a pipe or a file, it shows one frame, as --once does.
    """
    if as_json and not once:
        raise UserError("--json prints one document; use it with --once")
    store = Store()
    prober = top_mod.Prober(store.path)
    if not console.is_terminal:
        once = True  # a pipe or a file gets one frame: redrawing in place needs a terminal
    if once:
        prober.probe_all()
        shown = top_mod.frame(store, prober, all_boxes=all_boxes)
        if as_json:
            print_json("top", **top_mod.as_json(shown))
        else:
            console.print(render(shown, interval=None))
        return
    stop = threading.Event()

    def ask_forever() -> None:
        while not stop.is_set():
            prober.probe_all()
            stop.wait(interval)

    threading.Thread(target=ask_forever, name="rgt-top-probe", daemon=True).start()
    try:
        # auto_refresh off: a frame is drawn only when it is rebuilt, once a second, in place
        with Live(console=console, auto_refresh=False, transient=False,
                  vertical_overflow="crop") as live:
            while True:
                shown = top_mod.frame(store, prober, all_boxes=all_boxes)
                live.update(render(shown, interval=interval, asked=prober.finished_at),
                            refresh=True)
                time.sleep(1.0)
    except KeyboardInterrupt:
        stop.set()  # the probe thread is a daemon: a probe in flight does not hold the exit


def render(f: top_mod.Frame, *, interval: float | None, asked: float | None = None,
           width: int | None = None) -> Group:
    """The board, one aligned row per box (up-time, money, what needs attention) and per run
    under it (status, age, progress). A row that does not fit the terminal puts its last
    column on a line of its own, so nothing is lost at 80 columns; no line is wider."""
    width = width or console.width
    if not f.boxes:
        return Group(Text("No boxes up. Register one with `rgt up`, or try `rgt demo`."))
    rows: list[tuple[Text, Text, str, Text]] = []
    for line in f.boxes:
        rows.append(_box_row(line))
        rows += [_run_row(line.box.name, run) for run in f.runs.get(line.box.name, [])]
        if more := f.more.get(line.box.name):
            rows.append((Text(" └ …"), Text(""), "", Text(
                f"{more} older ended run{'s' * (more != 1)} not pulled: rgt runs "
                f"{line.box.name} --all", style="dim")))
    boxes = {id(row) for row in rows if not row[0].plain.startswith(" └ ")}
    name_w = min(max(len(r[0]) for r in rows), 34)
    state_w = max(len(r[1]) for r in rows)
    time_w = max(len(r[2]) for r in rows)
    lead = name_w + state_w + time_w + 3
    out = [Text.assemble(("box / run".ljust(name_w), "bold"), " ",
                         ("state".ljust(state_w), "bold"), " ",
                         ("time".rjust(time_w), "bold"), " ", ("money · progress", "bold"))]
    for row in rows:
        name, state, clock, detail = row
        name = name.copy()
        name.truncate(name_w, overflow="ellipsis", pad=True)
        head = Text.assemble(name, " ", _pad(state, state_w), " ", clock.rjust(time_w), " ")
        # a box row's tail (a danger clock) may be cut; a run's progress moves to a line below
        if lead + len(detail) <= width or not detail or id(row) in boxes:
            out.append(_fit(Text.assemble(head, detail), width))
        else:  # too wide: the detail on its own line, under the name
            out.append(_fit(head, width))
            out.append(_fit(Text.assemble("     ", detail), width))
    up = sum(1 for line in f.boxes if line.box.state == "up")
    footer = (f"{up} box{'es' if up != 1 else ''} up · ${f.spent:.2f} spent · "
              f"${f.burn_per_hour:.2f}/h · {time.strftime('%H:%M:%S', time.localtime(f.at))}")
    if interval is not None:
        if asked is None or f.at - asked > 2 * interval + 5:  # a slow box: say how stale
            footer += " · asking…" if asked is None else f" · asked {duration(f.at - asked)} ago"
        footer += " · Ctrl-C quits"
    out.append(_fit(Text(footer, style="dim"), width))
    return Group(*out)


def _box_row(line) -> tuple[Text, Text, str, Text]:
    box = line.box
    money = f"${line.spent:.2f}" if line.spent is not None else "-"
    if line.walltime_s is not None:
        money = f"{duration(line.walltime_s)} walltime"
    elif box.rate is not None and box.state == "up":
        money += f" @{box.rate:g}/h"
    detail = Text(money)
    if line.idle_s is not None and line.idle_s > IDLE_WARNING_S:
        detail.append(f" · idle {duration(line.idle_s)}, billing", style="bold red")
    for billing in line.still_billing:
        detail.append(f" · still billing: {billing}", style="yellow")
    if len(detail) == len(money) and line.clocks:
        detail.append(f" · {line.clocks[0]}", style="dim")
    name = Text.assemble((box.name, "bold"), " ", (box.profile, "dim"))
    return name, Text(box.state), duration(line.uptime_s), detail


def _run_row(box: str, run: top_mod.RunRow) -> tuple[Text, Text, str, Text]:
    detail = safe_text(run.progress)  # the box's log and state: sanitised
    if run.checkpoint_age_s is not None:
        detail.append(f"{' · ' if run.progress else ''}ckpt {duration(run.checkpoint_age_s)} "
                      "ago")
    if run.note:
        detail = safe_text(run.note, style="yellow")
    elif run.status not in LIVE and not run.pulled:
        detail = Text.assemble((f"rgt pull {box} {run.id}", "bold"),
                               *((" · ", detail) if detail else ()))
    status = safe_text(run.status, style=STATUS_STYLE.get(run.status, "red"))
    return Text(f" └ {run.id}"), status, duration(run.age_s), detail


def _pad(text: Text, width: int) -> Text:
    text = text.copy()
    text.truncate(width, pad=True)
    return text


def _fit(text: Text, width: int) -> Text:
    text.no_wrap = True
    text.truncate(width, overflow="ellipsis")
    return text


@app.command()
def plot(
    name: BoxArg,
    run_id: Annotated[str | None, typer.Argument(help="Run id (a unique prefix will do); "
                                                      "default: the newest run.")] = None,
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", "-m", help="A metric to draw (repeatable); default: the loss and up to "
                               "three other metrics.")] = None,
    png: Annotated[Path | None, typer.Option(
        "--png", help="Also write the chart to this PNG file (needs the `plot` extra: "
                      "pip install 'rgt[plot]').")] = None,
    pulled: Annotated[bool, typer.Option(
        "--pulled", help="Read the log `rgt pull` fetched, not the box's.")] = False,
    log_y: Annotated[bool, typer.Option("--log-y", help="A logarithmic y axis.")] = False,
    cell: Annotated[int | None, typer.Option(help="A sweep's cell.")] = None,
    height: Annotated[int, typer.Option(min=3, max=60, help="Rows per chart.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="The series as one JSON document "
                                                         "on stdout.")] = False,
) -> None:
    """Draw the loss and the other metrics the run logged: in the terminal, and to a PNG.

    The metrics are read from the run's log as `rgt watch` reads them (`step=N loss=X`,
    `iter N: loss X`, JSON lines, Hugging Face dict lines): from the box while it is up, else
    from the log `rgt pull` brought back.
    """
    if png is not None:  # the extra and the file name first: no chart drawn, then refused
        from rgt.cli import pngplot

        pngplot.check(png)
    from rgt.lifecycle import metrics as metrics_mod  # (the log reader: only `plot` needs it)

    data = metrics_mod.metric_series(Store(), name, run_id, pulled=pulled, cell=cell)
    keys = choose(data, metric)
    if as_json:
        print_json("plot", box=data.box, run=data.run, source=data.source, x=data.x_label,
                   series={k: data.series[k] for k in (metric and keys or data.ordered())},
                   notes=data.notes)
    else:
        width = min(console.width, 120)
        for key in keys:
            points = data.series[key]
            low = min(points, key=lambda p: p[1])
            console.print(Text.assemble((key, "bold"), f"  last {points[-1][1]:.4g} · min "
                                        f"{low[1]:.4g} at {data.x_label} {low[0]:g} · "
                                        f"{len(points)} points"))
            console.print(Text("\n".join(termplot.chart(points, width=width, height=height,
                                                        x_label=data.x_label, log_y=log_y)),
                               style="cyan"), soft_wrap=True)
        others = [k for k in data.ordered() if k not in keys]
        if others:
            console.print(Text(f"also logged: {', '.join(others[:12])}"
                               + (" …" if len(others) > 12 else "") + " (--metric NAME)",
                               style="dim"))
        where = "the box" if data.source == "box" else data.source
        console.print(Text(f"{data.box} · {data.run} · read from {where}", style="dim"))
    for note in data.notes:
        err_console.print(safe_text(f"note: {note}", style="yellow"))
    if png is not None:
        from rgt.cli import pngplot

        pngplot.write_png(data, keys, png, log_y=log_y)
        if not as_json:
            console.print(f"[green]✓[/] wrote {escape(str(png))}")


def choose(data: Series, wanted: list[str] | None) -> list[str]:
    """The metrics to draw: the ones asked for (each must exist), else the loss-like ones and
    other metrics first, four at most, each a line (two points or more; the epoch is the x
    axis's business, not a chart)."""
    if wanted:
        unknown = [k for k in wanted if k not in data.series]
        if unknown:
            raise UserError(f"run {data.run} logged no metric {unknown[0]!r}; it logged: "
                            f"{', '.join(data.ordered()[:20])}")
        return list(dict.fromkeys(wanted))
    drawn = [k for k in data.ordered() if k != "epoch" and len(data.series[k]) > 1]
    return drawn[:4] or data.ordered()[:1]

