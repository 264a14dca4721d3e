"""`rgt demo`: the whole lifecycle on this machine in about a minute.

A `local` box, the bundled CPU training example (which checkpoints with `rgt.ckpt`), run
detached, watched with a progress bar, pulled, verified and torn down — the same code paths a
rented box takes, with nothing to pay.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import sys
import warnings
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
import yaml

from rgt.cli import app
from rgt.cli.console import console, escape
from rgt.errors import UserError
from rgt.lifecycle import boxes, down, launch, pull, watch
from rgt.spec import load_spec
from rgt.store import Store, rgt_home

STEP = re.compile(r"\bstep=(\d+)")


def demo_job(directory: Path, steps: int) -> Path:
    """Write the example's workdir and job spec; return the spec's path."""
    directory.mkdir(parents=True, exist_ok=True)
    example = resources.files("rgt.examples").joinpath("train_mlp.py")
    (directory / "train_mlp.py").write_bytes(example.read_bytes())
    python = sys.executable  # the box is this machine: use the interpreter that has torch
    spec = {
        "name": "mlp-demo",
        "workdir": ".",
        "run": f'{python} train_mlp.py --steps {steps} --ckpt-dir "$RGT_CKPT_DIR" '
               f"--out out --save-every 50 --sleep 0.02",
        "smoke": f"{python} train_mlp.py --steps 3 --ckpt-dir /tmp/rgt-smoke-ckpt "
                 "--out /tmp/rgt-smoke-out",
        "outputs": ["out"],
        "checkpoint_dir": "$RGT_CKPT_DIR",
    }
    path = directory / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@app.command()
def demo(
    steps: Annotated[int, typer.Option(min=1, help="Training steps.")] = 600,
    keep: Annotated[bool, typer.Option(help="Leave the box up (skip the teardown).")] = False,
) -> None:
    """Run the whole lifecycle on this machine: up → run → watch → pull → verify → down."""
    try:
        with warnings.catch_warnings():  # torch warns when numpy is absent
            warnings.simplefilter("ignore")
            import torch  # noqa: F401
    except ImportError:
        raise UserError("the demo trains a small PyTorch model: pip install 'rgt[torch]' "
                        "(from a checkout: pip install -e '.[torch]')") from None
    store = Store()
    name = f"demo-{secrets.token_hex(2)}"
    workdir = rgt_home() / "demo" / name
    spec = load_spec(demo_job(workdir, steps))

    console.rule("[bold]1. up")
    box, _, _ = boxes.up(store, name, "local", None, rate=None, data_dir=None, durable_dir=None)
    stage = ["run"]
    try:
        _lifecycle(store, box, spec, steps, keep, workdir, stage)
    except (UserError, KeyboardInterrupt) as err:
        # A demo that failed must not leave a box behind: keep its log, tear the box down.
        log = workdir / "failed-run.log"
        with contextlib.suppress(UserError, IndexError):
            run = store.run(name)
            log.write_text(watch.read_log(box, run))
        plan = down.plan_down(store, name)
        down.execute_down(store, plan, discarded=not plan.safe)
        where = f"; its log is in {log}" if log.exists() else ""
        message = str(err) or "interrupted"
        raise UserError(f"the demo stopped at step '{stage[0]}': {message} — the demo box "
                        f"{name} was torn down{where}", exit_code=1) from None


def _lifecycle(store: Store, box, spec, steps: int, keep: bool, workdir: Path,
               stage: list[str]) -> None:
    """Steps 2-5 of the demo; `stage[0]` names the step under way."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    name = box.name
    console.print(f"box [bold]{name}[/]: scratch {escape(box.data_dir)}")

    console.rule("[bold]2. run (detached)")
    run, _ = launch.launch(store, name, spec)
    console.print(f"run [bold]{run.id}[/] started; it would survive this terminal closing")

    stage[0] = "watch"
    console.rule("[bold]3. watch")
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} steps"), TimeElapsedColumn(),
                  TextColumn("{task.fields[metrics]}", markup=False),  # the job's own line
                  console=console) as bar:
        task = bar.add_task("training", total=steps, metrics="")

        def update(summary: dict) -> None:
            metrics = summary.get("metrics") or ""
            match = STEP.search(metrics)
            if match:
                bar.update(task, completed=min(int(match[1]), steps), metrics=metrics[-60:])

        final = watch.wait_until_done(store, box, run, poll_s=1.0, timeout_s=600,
                                      on_update=update)
        if final["status"] == "succeeded":
            bar.update(task, completed=steps)
    if final["status"] != "succeeded":
        raise UserError(f"the demo run ended {final['status']}: "
                        f"{' '.join(final.get('log_tail', [])[-3:])}", exit_code=1)
    console.print(f"[green]✓ succeeded[/] ({escape(final.get('metrics') or 'no metrics line')})")

    stage[0] = "pull"
    console.rule("[bold]4. pull + verify")
    dest = workdir / "results"
    report = pull.pull(store, name, run.id, dest)
    if not report["ok"]:
        raise UserError("pull did not verify: " + "; ".join(report["problems"]), exit_code=1)
    # Checkpoints are pull's checkpoint units (a rgt.ckpt file with its sidecar is one), not
    # every file that parsed: sidecars and metrics JSON are files, not checkpoints.
    loaded = sum(1 for unit in report.get("checkpoints") or [] if "load" in unit["checked"])
    console.print(f"[green]✓[/] {report['counts']['files']} files re-hashed, {loaded} checkpoints "
                  f"loaded → {escape(str(dest))}")

    if keep:
        console.print(f"box {name} left up (--keep); tear it down with `rgt down {name}`")
        return
    stage[0] = "down"
    console.rule("[bold]5. down (Iron Law: evidence verified)")
    plan = down.plan_down(store, name)
    if not plan.safe:
        raise down.refusal(plan)
    outcome = down.execute_down(store, plan, discarded=False)
    console.print(f"[green]✓[/] {outcome}")
    console.print(f"Results: {escape(str(dest))}  ·  history: [bold]rgt ls --all[/]")
