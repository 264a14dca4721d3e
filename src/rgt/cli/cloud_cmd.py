"""Cloud verbs: `rgt offers`, `rgt rent`, `rgt cloud-status` (Lambda Cloud, vast.ai).

`rent` creates an instance through the platform's API, waits for it and registers it like
`rgt up` does, so every other verb (audit, run, watch, pull, down) works on it unchanged.
`rgt down` on a rented box stops the meter through the API, after the Iron Law.
API keys are read from the environment by name (LAMBDA_API_KEY, VAST_API_KEY), never options.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from rgt.cli import app
from rgt.cli.console import console, err_console
from rgt.errors import UserError
from rgt.store import Store


def _progress(message: str) -> None:
    err_console.print(f"[dim]…[/] {escape(message)}", highlight=False)


@app.command()
def offers(
    gpu: Annotated[str, typer.Option(help="GPU name as vast.ai spells it (RTX_4090, H100_SXM).")
                   ] = "RTX_4090",
    max_price: Annotated[float | None, typer.Option(help="Most USD per hour.")] = None,
    num_gpus: Annotated[int, typer.Option(help="GPUs per instance.")] = 1,
    min_reliability: Annotated[float, typer.Option(help="Host reliability floor (VAST7).")
                               ] = 0.98,
    unverified: Annotated[bool, typer.Option(help="Include unverified hosts (VAST7).")] = False,
    interruptible: Annotated[bool, typer.Option(help="Bid (interruptible) offers.")] = False,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable rows.")] = False,
) -> None:
    """vast.ai offers with safe filters on (verified, rentable, direct SSH, reliable)."""
    from rgt.platforms import vastai

    rows = vastai.offers(gpu, max_price, num_gpus=num_gpus, min_reliability=min_reliability,
                         verified=not unverified, interruptible=interruptible, limit=limit)
    if as_json:
        print(json.dumps([o.as_row() for o in rows], indent=2))
        return
    if not rows:
        err_console.print(f"no {gpu} offers match (max ${max_price}/h, reliability ≥ "
                          f"{min_reliability}); loosen --max-price or --min-reliability")
        raise typer.Exit(1)
    table = Table(title=f"vast.ai {gpu} offers (verified, direct SSH)", title_justify="left")
    for column in ("offer", "gpus", "$/h", "bandwidth $/GB up/down", "reliability",
                   "cuda max / driver", "disk GB", "where"):
        table.add_column(column)
    for o in rows:
        table.add_row(str(o.id), f"{o.num_gpus}× {escape(o.gpu_name)}", f"{o.usd_per_hour:.3f}",
                      f"{o.bandwidth_up_usd_per_gb:.3f} / {o.bandwidth_down_usd_per_gb:.3f}",
                      f"{o.reliability:.3f}", f"{o.cuda_max_good} / {escape(o.driver_version)}",
                      f"{o.disk_gb:.0f}", escape(o.location))
    console.print(table)
    console.print("Bandwidth is billed per GB in both directions, in every state (VAST9). "
                  "Next: rgt rent NAME --profile vastai --offer ID --image IMG --disk GB")


@app.command()
def rent(
    name: Annotated[str, typer.Argument(help="A name for the new box.")],
    profile: Annotated[str, typer.Option("--profile", "-p", help="lambda or vastai.")],
    gpu: Annotated[str, typer.Option(help="Lambda: TYPE:COUNT or an instance type name.")
                   ] = "H100:1",
    region: Annotated[str | None, typer.Option(help="Lambda region (default: first with "
                                                    "capacity, or the filesystem's).")] = None,
    filesystem: Annotated[str | None, typer.Option(help="Lambda filesystem to attach (only "
                                                        "possible at launch, LAM2).")] = None,
    ssh_key: Annotated[str | None, typer.Option(help="Lambda SSH key name to install.")] = None,
    wait: Annotated[float, typer.Option(help="Lambda: seconds to wait for capacity (LAM5).")
                    ] = 1800,
    offer: Annotated[int | None, typer.Option(help="vast.ai offer id (see `rgt offers`).")
                     ] = None,
    image: Annotated[str | None, typer.Option(help="vast.ai Docker image.")] = None,
    disk: Annotated[float, typer.Option(help="vast.ai disk GB; fixed for life (VAST10).")] = 50,
    bid: Annotated[float | None, typer.Option(help="vast.ai interruptible bid, USD/h (fixed at "
                                                   "create, VAST4).")] = None,
    onstart: Annotated[str, typer.Option(help="vast.ai: extra onstart commands (no secrets; "
                                              "VAST11).")] = "",
    secret: Annotated[list[str] | None, typer.Option(help="vast.ai: an env var NAME to pass "
                                                          "at create (repeatable).")] = None,
    image_cuda: Annotated[float | None, typer.Option(help="vast.ai: the image's CUDA if its "
                                                          "tag does not say.")] = None,
    identity: Annotated[str | None, typer.Option(help="SSH private key file.")] = None,
    data_dir: Annotated[str | None, typer.Option(help="Override the profile's DATA_DIR.")] = None,
    durable_dir: Annotated[str | None, typer.Option(
        help="Override the profile's DURABLE_DIR.")] = None,
) -> None:
    """Rent a new instance through the platform's API and register it as a box."""
    store = Store()
    if profile == "lambda":
        from rgt.platforms.lambda_cloud import lambda_up

        box = lambda_up(store, name, gpu, region, filesystem, ssh_key=ssh_key, wait_s=wait,
                        on_wait=_progress, identity=identity, data_dir=data_dir,
                        durable_dir=durable_dir)
    elif profile == "vastai":
        from rgt.platforms.vastai import vast_up

        if offer is None or not image:
            raise UserError("vast.ai needs --offer ID (see `rgt offers`) and --image IMAGE")
        box = vast_up(store, name, offer, image, disk, bid=bid, onstart=onstart,
                      secrets=tuple(secret or ()), image_cuda_version=image_cuda,
                      on_wait=_progress, identity=identity, data_dir=data_dir,
                      durable_dir=durable_dir)
    else:
        raise UserError(f"rgt rent knows lambda and vastai, not {profile!r}; for a box you "
                        f"rented yourself use `rgt up {name} --profile {profile} --ssh ...`")
    console.print(f"[green]✓[/] box [bold]{escape(name)}[/] ({box.profile}) instance "
                  f"{box.extra.get('instance_id')} answers at "
                  f"{escape(str(box.connection.get('host')))}; ${box.rate or 0:.2f}/h")
    for note in box.extra.get("notes", []):
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(f"Next: [bold]rgt audit {name}[/], then [bold]rgt run {name} JOB.yaml[/]; "
                  f"[bold]rgt down {name}[/] stops the meter through the API")


@app.command("cloud-status")
def cloud_status(
    name: Annotated[str, typer.Argument(help="A box made with `rgt rent`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """What the platform's API says about a rented box's instance, and what it means."""
    store = Store()
    box = store.box(name)
    if box.profile == "lambda":
        from rgt.platforms.lambda_cloud import instance_status

        status = instance_status(box)
    elif box.profile == "vastai":
        from rgt.platforms.vastai import instance_status as vast_instance_status

        status = vast_instance_status(store, box)
    else:
        raise UserError(f"box {name!r} ({box.profile}) was not rented through an API")
    if as_json:
        print(json.dumps(status, indent=2, default=str))
        return
    state = status.get("state") or status.get("status")
    gotcha = f" ({status['gotcha']})" if status.get("gotcha") else ""
    console.print(f"[bold]{escape(name)}[/] instance {status['instance_id']}: "
                  f"[bold]{escape(str(state))}[/]{gotcha}")
    if status.get("status_msg"):
        console.print(f"  status_msg: {escape(status['status_msg'])}")
    console.print(f"  {escape(status['advice'])}")
    for billing in box.extra.get("still_billing") or []:
        console.print(f"[yellow]still billing:[/] {escape(billing)}")
