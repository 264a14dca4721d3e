"""Cloud verbs: `rgt up`'s renting flags, `rgt offers`, `rgt cloud-status`.

`rgt up NAME --profile lambda --gpu H100:1` (or vastai, runpod, with their own flags) reaches
the platform's `provision`, which creates an instance through its API, waits for it and
registers it as `rgt up --ssh` does for a box rented by hand, so every other verb (audit, run,
watch, pull, down) works on it unchanged. Which flags a platform takes is the platform's to
say: it declares them (rgt.platforms.options), this module turns them into Typer options, and
the platform refuses the others by name, before renting. `rgt down` on a rented box stops the meter
through the API, after the Iron Law. `rgt rent` is the old, hidden spelling of the same thing.
API keys are read from the environment by name (LAMBDA_API_KEY, VAST_API_KEY, RUNPOD_API_KEY),
never options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.table import Table

from rgt.boxfacts import facts
from rgt.cli import app
from rgt.cli.console import console, err_console, escape, print_json, print_registered
from rgt.errors import UserError
from rgt.platforms import DEFAULT_PROFILE
from rgt.platforms.options import RESOURCES, Option, union
from rgt.store import Box, Store

# Every flag a platform adds to `rgt up` or `rgt offers` is declared by the platform
# (rgt.platforms.options; its flags.py) and turned into a Typer option here, none written out:
# a new platform's flags appear without a line in rgt.cli. None means "not given", so a flag
# meant for another platform (or for a box rented by hand) is refused by name, not ignored.


def typer_option(option: Option) -> Any:
    """OPTION as the annotation Typer reads: its type (None when not given) and its help."""
    kind: Any = list[option.type] if option.repeatable else option.type
    decls = [] if option.type is bool and option.negatable else [option.flag]
    shown: Any = option.default_shown if option.default_shown is not None else True
    return Annotated[kind if option.type is bool else kind | None, typer.Option(
        *decls, help=option.help, rich_help_panel=option.panel, metavar=option.metavar,
        show_default=shown)]


def with_flags(*options: Option) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command whose last parameter is `**flags` takes OPTIONS as keyword flags: Typer reads
    the parameters from `__signature__`, and passes their values on in `flags`."""
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(func, eval_str=True)  # Typer reads annotations as objects
        *own, rest = signature.parameters.values()
        if rest.kind is not inspect.Parameter.VAR_KEYWORD:
            raise TypeError(f"{func.__name__} needs **flags last to take platforms' flags")
        clash = {p.name for p in own} & {o.name for o in options}
        if clash:
            raise TypeError(f"{func.__name__} already has {sorted(clash)}: a platform's flag "
                            "may not reuse a name of the verb's own")
        added = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY,
                                   default=False if o.type is bool else None,
                                   annotation=typer_option(o)) for o in options]
        func.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *added])
        return func
    return decorate


# `rgt render`'s resource flags, as the vocabulary declares them.
GpuOpt, CpusOpt, MemOpt, NodesOpt, TimeOpt = (
    typer_option(next(o for o in RESOURCES if o.name == name))
    for name in ("gpu", "cpus", "mem", "nodes", "time"))


def given(options: list[Option] | tuple[Option, ...], flags: dict[str, Any]) -> dict[str, Any]:
    """The values of OPTIONS that FLAGS sets, under their Request.options keys; a number out
    of its declared range is refused here, in one line, before any platform is asked."""
    chosen: dict[str, Any] = {}
    for option in options:
        value = flags.get(option.name)
        if value is None or value is False or (option.repeatable and not value):
            continue
        refused = option.refusal(value)
        if refused:
            raise UserError(refused)
        chosen[option.option_key] = tuple(value) if option.repeatable else value
    return chosen


def up_request(**flags: Any) -> tuple[dict, dict]:
    """`rgt up`'s flags as (resources, options): the vocabulary's words, and the platforms' own
    settings under their `Request.options` keys. A flag no platform declares is a mistake in
    rgt, not the user's (TypeError)."""
    from rgt.spec import GPU_CONSTRAINT  # the spec's schema: not for `rgt offers --help`

    vocabulary = {o.name for o in RESOURCES}
    declared = union("up")
    unknown = set(flags) - vocabulary - {o.name for o in declared}
    if unknown:
        raise TypeError(f"no platform declares {sorted(unknown)}")
    gpu = flags.get("gpu")
    choices = [g.strip() for g in gpu.split(",")] if gpu else []
    if gpu and not all(GPU_CONSTRAINT.match(g) for g in choices):
        raise UserError(f"--gpu {gpu!r}: give TYPE:COUNT, or several separated by commas, "
                        "first preferred (H100:1,A100:1)")
    disk = flags.get("disk")
    if disk is not None and str(disk).replace(".", "", 1).isdigit():
        disk = f"{disk}G"  # a bare number is GB, as the spec reads one
    resources = {**{k: flags.get(k) for k in vocabulary},
                 "gpu": choices[0] if choices else None,
                 "disk": disk, "spot": flags.get("spot") or None,
                 "gpu_alternatives": choices if len(choices) > 1 else None}
    return ({k: v for k, v in resources.items() if v is not None}, given(declared, flags))


def progress(message: str) -> None:
    err_console.print(f"[dim]…[/] {escape(message)}", highlight=False)


def show_rented(box: Box, first: bool) -> None:
    from rgt.profiles import load_profile
    from rgt.remote.group import nodes

    console.print(f"[green]✓[/] box [bold]{escape(box.name)}[/] ({box.profile}) instance "
                  f"{escape(str(facts(box).instance_id))} answers at "
                  f"{escape(str(box.connection.get('host')))}; ${box.rate or 0:.2f}/h")
    for node in nodes(box):  # a rented group
        console.print(f"  node {node.rank}  instance {escape(str(node.instance_id))}  "
                      f"reached by the others at {escape(node.address)}")
    for note in facts(box).notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    print_registered(box, load_profile(box.profile), first,
                     then=f"; [bold]rgt down {box.name}[/] stops the meter through the API")


@app.command()
@with_flags(*union("offers"))
def offers(
    profile: Annotated[str, typer.Option("--profile", "-p", help="The renting platform: "
                                         "vastai, lambda or runpod.")] = DEFAULT_PROFILE["offers"],
    gpu: Annotated[str | None, typer.Option(
        help="GPU as the platform spells it, TYPE or TYPE:COUNT (vast.ai: RTX_4090, H100_SXM; "
             "Lambda: H100:1; RunPod: RTX4090:1).", show_default="vast.ai: RTX_4090; "
             "others: every type")] = None,
    max_price: Annotated[float | None, typer.Option(help="Most USD per hour.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs per instance.",
                                                 show_default="1")] = None,
    region: Annotated[str | None, typer.Option(
        help="Only what can start there (Lambda region, RunPod data centre).")] = None,
    interruptible: Annotated[bool, typer.Option(help="Bid (interruptible) offers.")] = False,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable rows.")] = False,
    **filters: Any,  # each platform's own filters (rgt.platforms.options: OFFERS in flags.py)
) -> None:
    """What a renting platform has now: vast.ai offers, Lambda capacity, RunPod stock.

    vast.ai (the default) is searched with safe filters on (verified, rentable, direct SSH,
    reliable); Lambda lists its instance types with the regions that have capacity; RunPod its
    GPU types with stock per data centre. A platform that rents nothing through an API says so.
    """
    from rgt.lifecycle import cloud
    from rgt.platforms.base import OfferQuery

    options = given(union("offers"), filters)  # the platform refuses those not its own
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
@with_flags(*RESOURCES, *union("up"))
def rent(
    name: Annotated[str, typer.Argument(help="A name for the new box.")],
    profile: Annotated[str, typer.Option("--profile", "-p", help="lambda or vastai.")],
    identity: Annotated[str | None, typer.Option(help="SSH private key file.")] = None,
    data_dir: Annotated[str | None, typer.Option(help="Override the profile's DATA_DIR.")] = None,
    durable_dir: Annotated[str | None, typer.Option(
        help="Override the profile's DURABLE_DIR.")] = None,
    **flags: Any,  # the resource words and each platform's own (rgt.platforms.options)
) -> None:
    """Old spelling of `rgt up NAME --profile lambda|vastai ...` (rents through the API)."""
    from rgt.lifecycle import boxes

    resources, options = up_request(**flags)
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
    for billing in facts(box).still_billing or []:
        console.print(f"[yellow]still billing:[/] {escape(billing)}")
