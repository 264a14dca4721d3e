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
from rich.markup import escape
from rich.table import Table

from rgt.cli import app
from rgt.cli.console import console, err_console, print_json, print_registered
from rgt.errors import UserError
from rgt.store import Box, Store

LAMBDA_PANEL = "Rent on Lambda Cloud (--profile lambda, without --ssh/--host)"
VAST_PANEL = "Rent on vast.ai (--profile vastai, without --ssh/--host)"
VAST_DISK_GB = 50.0

# The renting options, shared by `rgt up` and the hidden `rgt rent`. None means "not given",
# so a flag meant for the other platform (or for a box rented by hand) is caught, not ignored.
GpuOpt = Annotated[str | None, typer.Option(
    help="GPU to rent: TYPE:COUNT (H100:1, A100:8) or a Lambda instance type name.",
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
    resources = {"gpu": gpu, "cpus": cpus, "mem": mem,
                 "disk": None if disk is None else f"{disk:g}G", "image": image,
                 "region": region, "spot": spot or None, "bid": bid, "nodes": nodes,
                 "time": time}
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
        print_json("offers", offers=[o.as_row() for o in rows])
        return
    if not rows:
        price = "" if max_price is None else f"max ${max_price:g}/h, "
        err_console.print(f"no {escape(gpu)} offers match ({price}reliability ≥ "
                          f"{min_reliability:g}); check the GPU name (RTX_4090, H100_SXM) or "
                          "loosen --max-price or --min-reliability", highlight=False)
        raise typer.Exit(1)
    table = Table(title=f"vast.ai {escape(gpu)} offers (verified, direct SSH)",
                  title_justify="left")
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
                  "Next: rgt up NAME --profile vastai --offer ID --image IMG --disk GB")


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
    store = Store()
    box = store.box(name)
    if box.profile == "lambda":
        from rgt.platforms.lambda_cloud import instance_status

        status = instance_status(box)
    elif box.profile == "vastai":
        from rgt.platforms.vastai import instance_status as vast_instance_status

        status = vast_instance_status(store, box)
    elif box.profile == "runpod":
        from rgt.platforms.runpod import pod_status

        status = pod_status(store, box)  # also records a moved SSH port (RP6)
    else:
        raise UserError(f"box {name!r} ({box.profile}) was not rented through an API")
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
