"""Cloud verbs: `rgt up`'s renting flags, `rgt offers`, `rgt cloud-status`.

`rgt up NAME --profile lambda --gpu H100:1`, `rgt up NAME --profile vastai --offer ID --image
IMG --disk GB` and `rgt up NAME --profile runpod --gpu RTX4090:1 --image IMG` reach the
platform's `provision`, which creates an instance through its API, waits for it and registers
it as `rgt up --ssh` does for a box rented by hand, so every other verb (audit, run, watch,
pull, down) works on it unchanged. Which flags a platform takes is the platform's to say (it
refuses the others by name, before renting). `rgt down` on a rented box stops the meter
through the API, after the Iron Law. `rgt rent` is the old, hidden spelling of the same thing.
API keys are read from the environment by name (LAMBDA_API_KEY, VAST_API_KEY, RUNPOD_API_KEY),
never options.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from rgt.cli import app
from rgt.cli.console import console, err_console, escape, print_json, print_registered
from rgt.errors import UserError
from rgt.store import Box, Store

LAMBDA_PANEL = "Rent on Lambda Cloud (--profile lambda, without --ssh/--host)"
VAST_PANEL = "Rent on vast.ai (--profile vastai, without --ssh/--host)"
VAST_DISK_GB = 50.0

# The renting options, shared by `rgt up` and the hidden `rgt rent`. None means "not given",
# so a flag meant for the other platform (or for a box rented by hand) is caught, not ignored.
GpuOpt = Annotated[str | None, typer.Option(
    help="GPU to rent: TYPE:COUNT (H100:1, A100:8) or a Lambda instance type name; several, "
         "comma-separated, are tried in order until one has capacity (H100:1,A100:1).",
    rich_help_panel=LAMBDA_PANEL)]
RegionOpt = Annotated[str | None, typer.Option(
    help="Region (default: the first with capacity, or the filesystem's).",
    rich_help_panel=LAMBDA_PANEL)]
FilesystemOpt = Annotated[str | None, typer.Option(
    help="Filesystem to attach; only possible at launch, in its own region (LAM2).",
    rich_help_panel=LAMBDA_PANEL)]
SshKeyOpt = Annotated[str | None, typer.Option(
    help="Name of the Lambda SSH key to install (default: your only one).",
    rich_help_panel=LAMBDA_PANEL)]
WaitOpt = Annotated[float | None, typer.Option(
    help="Seconds to wait for capacity before giving up (LAM5).", show_default="1800",
    rich_help_panel=LAMBDA_PANEL)]
OfferOpt = Annotated[int | None, typer.Option(
    help="Offer id to rent (see `rgt offers`).", rich_help_panel=VAST_PANEL)]
ImageOpt = Annotated[str | None, typer.Option(
    help="Docker image; its CUDA must not exceed the host's (VAST5).",
    rich_help_panel=VAST_PANEL)]
DiskOpt = Annotated[float | None, typer.Option(
    help="Disk GB, fixed for the instance's life (VAST10).", show_default=f"{VAST_DISK_GB:g}",
    rich_help_panel=VAST_PANEL)]
BidOpt = Annotated[float | None, typer.Option(
    help="Interruptible bid, USD/h; fixed at create, preemptible (VAST4).",
    rich_help_panel=VAST_PANEL)]
OnstartOpt = Annotated[str | None, typer.Option(
    help="Extra onstart commands; no secrets in them (VAST11).", rich_help_panel=VAST_PANEL)]
SecretOpt = Annotated[list[str] | None, typer.Option(
    help="An env var NAME passed as env at create (repeatable; VAST11).",
    rich_help_panel=VAST_PANEL)]
ImageCudaOpt = Annotated[float | None, typer.Option(
    help="The image's CUDA version, if its tag does not say.", rich_help_panel=VAST_PANEL)]

RUNPOD_PANEL = "Rent on RunPod (--profile runpod, with --gpu and --image)"
VolumeOpt = Annotated[str | None, typer.Option(
    help="Network volume (name or id) as /workspace: it outlives the pod and bills on its "
         "own; without it /workspace dies with the pod (RP3).", rich_help_panel=RUNPOD_PANEL)]
CloudOpt = Annotated[str | None, typer.Option(
    "--cloud", help="secure or community.", show_default="secure",
    rich_help_panel=RUNPOD_PANEL)]
ContainerDiskOpt = Annotated[int | None, typer.Option(
    help="Container disk GB (/, wiped by every stop or restart: RP2).", show_default="20",
    rich_help_panel=RUNPOD_PANEL)]


# Resource flags of `rgt up` beyond those above: the one vocabulary (rgt.spec.Resources).
RESOURCES_PANEL = "Resources (the spec's `resources` words; each platform maps or refuses them)"
CpusOpt = Annotated[int | None, typer.Option(help="CPU cores.", rich_help_panel=RESOURCES_PANEL)]
MemOpt = Annotated[str | None, typer.Option(help="Memory: 32G, or GB as a number.",
                                            rich_help_panel=RESOURCES_PANEL)]
SpotOpt = Annotated[bool, typer.Option("--spot", help="Interruptible / preemptible capacity.",
                                       rich_help_panel=RESOURCES_PANEL)]
NodesOpt = Annotated[int | None, typer.Option(help="Nodes (multi-node jobs).",
                                              rich_help_panel=RESOURCES_PANEL)]
TimeOpt = Annotated[str | None, typer.Option("--time", help="Walltime: 01:30:00, 90m, 2h.",
                                             rich_help_panel=RESOURCES_PANEL)]


def up_request(*, gpu=None, cpus=None, mem=None, disk=None, image=None, region=None,
               spot=False, bid=None, nodes=None, time=None, filesystem=None, ssh_key=None,
               wait=None, offer=None, onstart=None, secret=None, image_cuda=None,
               volume=None, cloud=None, container_disk=None) -> tuple[dict, dict]:
    """`rgt up`'s flags as (resources, options): the vocabulary's words, and the platform's
    own settings. None means "not given", so the platform can refuse a flag it cannot use."""
    from rgt.spec import GPU_CONSTRAINT  # the spec's schema: not for `rgt offers --help`

    choices = [g.strip() for g in gpu.split(",")] if gpu else []
    if gpu and not all(GPU_CONSTRAINT.match(g) for g in choices):
        raise UserError(f"--gpu {gpu!r}: give TYPE:COUNT, or several separated by commas, "
                        "first preferred (H100:1,A100:1)")
    resources = {"gpu": choices[0] if choices else None, "cpus": cpus, "mem": mem,
                 "disk": None if disk is None else f"{disk:g}G", "image": image,
                 "region": region, "spot": spot or None, "bid": bid, "nodes": nodes,
                 "time": time, "gpu_alternatives": choices if len(choices) > 1 else None}
    options = {"filesystem": filesystem, "ssh_key": ssh_key, "wait": wait, "offer": offer,
               "onstart": onstart, "secrets": tuple(secret or ()) or None,
               "image_cuda": image_cuda, "volume": volume, "cloud": cloud,
               "container_disk": container_disk}
    return ({k: v for k, v in resources.items() if v is not None},
            {k: v for k, v in options.items() if v is not None})


def progress(message: str) -> None:
    err_console.print(f"[dim]…[/] {escape(message)}", highlight=False)


def show_rented(box: Box, first: bool) -> None:
    from rgt.profiles import load_profile

    console.print(f"[green]✓[/] box [bold]{escape(box.name)}[/] ({box.profile}) instance "
                  f"{escape(str(box.extra.get('instance_id')))} answers at "
                  f"{escape(str(box.connection.get('host')))}; ${box.rate or 0:.2f}/h")
    for note in box.extra.get("notes", []):
        console.print(f"[yellow]note:[/] {escape(note)}")
    print_registered(box, load_profile(box.profile), first,
                     then=f"; [bold]rgt down {box.name}[/] stops the meter through the API")


@app.command()
def offers(
    profile: Annotated[str, typer.Option("--profile", "-p", help="The renting platform: "
                                         "vastai, lambda or runpod.")] = "vastai",
    gpu: Annotated[str | None, typer.Option(
        help="GPU as the platform spells it, TYPE or TYPE:COUNT (vast.ai: RTX_4090, H100_SXM; "
             "Lambda: H100:1; RunPod: RTX4090:1).", show_default="vast.ai: RTX_4090; "
             "others: every type")] = None,
    max_price: Annotated[float | None, typer.Option(help="Most USD per hour.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs per instance.",
                                                 show_default="1")] = None,
    region: Annotated[str | None, typer.Option(
        help="Only what can start there (Lambda region, RunPod data centre).")] = None,
    min_reliability: Annotated[float | None, typer.Option(
        help="vast.ai: host reliability floor (VAST7).", show_default="0.98")] = None,
    unverified: Annotated[bool, typer.Option(help="vast.ai: include unverified hosts (VAST7).")
                          ] = False,
    interruptible: Annotated[bool, typer.Option(help="Bid (interruptible) offers.")] = False,
    cloud_: Annotated[str | None, typer.Option("--cloud", help="RunPod: secure or community.",
                                               show_default="secure")] = None,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable rows.")] = False,
) -> None:
    """What a renting platform has now: vast.ai offers, Lambda capacity, RunPod stock.

    vast.ai (the default) is searched with safe filters on (verified, rentable, direct SSH,
    reliable); Lambda lists its instance types with the regions that have capacity; RunPod its
    GPU types with stock per data centre. A platform that rents nothing through an API says so.
    """
    from rgt.lifecycle import cloud
    from rgt.platforms.base import OfferQuery

    if min_reliability is not None and not 0 <= min_reliability <= 1:
        raise UserError(f"--min-reliability {min_reliability:g}: give a fraction from 0 to 1 "
                        "(e.g. 0.95)")
    options = {k: v for k, v in (("min_reliability", min_reliability),
                                 ("unverified", unverified or None), ("cloud", cloud_))
               if v is not None}
    query = OfferQuery(gpu=gpu, count=num_gpus, region=region, spot=interruptible,
                       max_price=max_price, limit=limit, options=options)
    found = cloud.offers(profile, query)
    if as_json:
        print_json("offers", offers=found.records)
        return
    if not found.rows:
        err_console.print(escape(found.empty), highlight=False)
        raise typer.Exit(1)
    table = Table(title=escape(found.title), title_justify="left")
    for column in found.columns:
        table.add_column(column)
    for row in found.rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    for note in found.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if found.next:
        console.print(escape(found.next))


@app.command(hidden=True)
def rent(
    name: Annotated[str, typer.Argument(help="A name for the new box.")],
    profile: Annotated[str, typer.Option("--profile", "-p", help="lambda or vastai.")],
    gpu: GpuOpt = None,
    region: RegionOpt = None,
    filesystem: FilesystemOpt = None,
    ssh_key: SshKeyOpt = None,
    wait: WaitOpt = None,
    offer: OfferOpt = None,
    image: ImageOpt = None,
    disk: DiskOpt = None,
    bid: BidOpt = None,
    onstart: OnstartOpt = None,
    secret: SecretOpt = None,
    image_cuda: ImageCudaOpt = None,
    identity: Annotated[str | None, typer.Option(help="SSH private key file.")] = None,
    data_dir: Annotated[str | None, typer.Option(help="Override the profile's DATA_DIR.")] = None,
    durable_dir: Annotated[str | None, typer.Option(
        help="Override the profile's DURABLE_DIR.")] = None,
) -> None:
    """Old spelling of `rgt up NAME --profile lambda|vastai ...` (rents through the API)."""
    from rgt.lifecycle import boxes

    resources, options = up_request(gpu=gpu, region=region, filesystem=filesystem,
                                    ssh_key=ssh_key, wait=wait, offer=offer, image=image,
                                    disk=disk, bid=bid, onstart=onstart, secret=secret,
                                    image_cuda=image_cuda)
    if identity:
        options["identity"] = identity
    store = Store()
    box, _, first = boxes.up(store, name, profile, None, rate=None, data_dir=data_dir,
                             durable_dir=durable_dir, resources=resources, options=options,
                             on_wait=progress)
    show_rented(box, first)


@app.command("cloud-status")
def cloud_status(
    name: Annotated[str, typer.Argument(help="A box rented through `rgt up` (Lambda, vast.ai, "
                                             "RunPod).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """What the platform's API says about a rented box's instance, and what it means."""
    from rgt.lifecycle import cloud

    box, status = cloud.cloud_status(Store(), name)
    if as_json:
        print_json("cloud-status", box=name, instance=status)
        return
    state = status.get("state") or status.get("status")
    gotcha = f" ({escape(str(status['gotcha']))})" if status.get("gotcha") else ""
    console.print(f"[bold]{escape(name)}[/] instance {escape(str(status['instance_id']))}: "
                  f"[bold]{escape(str(state))}[/]{gotcha}")
    if status.get("status_msg"):
        console.print(f"  status_msg: {escape(status['status_msg'])}")
    console.print(f"  {escape(status['advice'])}")
    for billing in box.extra.get("still_billing") or []:
        console.print(f"[yellow]still billing:[/] {escape(billing)}")
