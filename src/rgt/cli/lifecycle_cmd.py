"""The lifecycle verbs: up, smoke, run, watch, logs, pull, down (`audit` and `ls` have their
own modules)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel

from rgt import skycloud
from rgt.boxfacts import facts
from rgt.cli import app
from rgt.cli import cloud_cmd as cloud
from rgt.cli.args import BoxArg, InfraOpt, InstanceTypeOpt, RunArg
from rgt.cli.confirm import typed_name
from rgt.cli.console import (
    console,
    err_console,
    escape,
    print_checkpoints,
    print_json,
    print_registered,
)
from rgt.cli.transfer_bar import transfer_bar
from rgt.cli.watch_cmd import (  # `rgt run` and `logs -f` follow the log as watch does
    say_waiting,
    watch,
    write_through,
)
from rgt.errors import UserError
from rgt.lifecycle import boxes, launch, save_hints
from rgt.lifecycle import down as down_mod
from rgt.lifecycle import pull as pull_mod
from rgt.lifecycle import render as render_mod
from rgt.lifecycle import smoke as smoke_mod
from rgt.lifecycle import watch as watch_mod
from rgt.lifecycle.pull_checkpoints import checkpoints_flag
from rgt.platforms import DEFAULT_PROFILE
from rgt.profiles import load_profile
from rgt.remote.group import nodes as group_nodes
from rgt.remote.register import check_dir_flags
from rgt.spec import load_spec
from rgt.store import Store, check_box_name
from rgt.transport.transfer import streams_flag

StreamsOpt = Annotated[str | None, typer.Option(
    "--streams", metavar="N", help="Parallel connections for the transfer, 1-64 (default: "
                                   "chosen from the link's round trip and rate; RGT_STREAMS).")]


@app.command()
@cloud.with_flags(*cloud.RESOURCES, *cloud.union("up"))
def up(
    name: BoxArg,
    profile: Annotated[str | None, typer.Option(
        "--profile", "-p", help="Platform profile (default: local; generic-ssh with --ssh/--host)."
    )] = None,
    ssh: Annotated[list[str] | None, typer.Option(
        help="The console's connection string, pasted as is: 'ssh -p 38211 root@host'; "
             "once per machine for a group of several (multi-node jobs), the head first."
    )] = None,
    hosts: Annotated[Path | None, typer.Option(
        help="A file naming a group's machines, one a line as --ssh takes them, head first.")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Host name, IP or ~/.ssh/config alias.")] = None,
    port: Annotated[int | None, typer.Option(help="SSH port.")] = None,
    user: Annotated[str | None, typer.Option(help="SSH user.")] = None,
    identity: Annotated[str | None, typer.Option(help="SSH private key file.")] = None,
    ssh_config: Annotated[str | None, typer.Option(help="An ssh config file (ssh -F).")] = None,
    rate: Annotated[float | None, typer.Option(min=0, help="What the box costs, USD per hour.")
                    ] = None,
    data_dir: Annotated[str | None, typer.Option(help="Override the profile's DATA_DIR.")] = None,
    durable_dir: Annotated[str | None, typer.Option(
        help="Override the profile's DURABLE_DIR.")] = None,
    **flags: Any,  # the resource words and each platform's own (rgt.platforms.options)
) -> None:
    """Register a box you rented (--ssh/--host) or this machine, and check that it answers.

    With a platform that rents (--profile lambda, vastai …) and no --ssh/--host: rent one
    through its API first, as the resource flags ask; a flag the platform cannot honour is
    refused by name before anything is rented.
    """
    check_box_name(name)  # before anything is rented or created on its behalf
    if rate is not None and not math.isfinite(rate):  # typer's min=0 lets inf and nan through
        raise UserError(f"--rate must be a number of USD per hour, not {rate}")
    check_dir_flags(data_dir, durable_dir)
    store = Store()
    resources, options = cloud.up_request(**flags)
    group = boxes.group_targets(ssh or [], hosts, identity, ssh_config)
    if group and host:
        raise UserError("give a group's machines with --ssh (or --hosts), not --host")
    if group or host:
        target = group[0] if group else boxes.ssh_target(None, host, port, user, identity,
                                                          ssh_config)
    else:  # no connection: these are for the instance a platform rents, if it rents
        target = None
        options.update({k: v for k, v in (("identity", identity), ("user", user),
                                          ("port", port), ("ssh_config", ssh_config))
                        if v is not None})
    chosen = profile is None and target is not None
    if profile is None:  # --ssh/--host alone: the machine they name, not this one
        profile = "generic-ssh" if target is not None else "local"
    box, prof, first = boxes.up(store, name, profile, target, rate=rate, data_dir=data_dir,
                                durable_dir=durable_dir, resources=resources,
                                options=options, on_wait=cloud.progress, group=group[1:])
    if facts(box).rented:  # rented here, through the platform's API
        cloud.show_rented(box, first)
        return
    members = group_nodes(box)  # a group: each machine, by the rank it gets, where reached
    console.print(f"[green]✓[/] box [bold]{name}[/] ({prof.name}) answers: "
                  + (f"{len(members)} machines, the head " if len(members) > 1 else "")
                  + escape(facts(box).uname or ''))
    for node in members if len(members) > 1 else []:
        console.print(f"  node {node.rank}  {escape(node.address)}  data "
                      f"{escape(node.box.data_dir)}")
    print_registered(box, prof, first)
    if chosen:
        console.print("[yellow]note:[/] no --profile: registered as generic-ssh, a machine whose "
                      "platform rgt does not know; `rgt profiles` lists the ones it does "
                      "(`--profile autodl` …: what stops the meter, what it deletes)")


@app.command()
def smoke(spec_file: Annotated[Path, typer.Argument(help="The job spec (YAML).")],
          timeout: Annotated[float | None, typer.Option(help="Seconds.")] = None,
          infra: InfraOpt = None, instance_type: InstanceTypeOpt = None) -> None:
    """Run the job's smoke command here on the CPU before renting (fails on traceback)."""
    if timeout is not None and not 0 < timeout < math.inf:
        raise UserError(f"--timeout must be a number of seconds above 0, not {timeout}")
    spec = load_spec(spec_file, overrides=skycloud.overrides(
        infra, instance_type, "this machine", "local"))  # smoke runs here
    result = smoke_mod.smoke(spec, timeout)
    tail = "\n".join(result.output.strip().splitlines()[-15:])
    if tail:
        console.print(Panel(escape(tail), title="smoke output (tail)", expand=False))
    if not result.ok:
        err_console.print(f"[bold red]smoke failed:[/] {escape(result.reason)}")
        raise typer.Exit(1)
    console.print(f"[green]✓ smoke passed[/] in {result.seconds:.1f} s")
    for hint in save_hints.hints(spec.workdir, commands=[spec.run]):
        console.print(f"[yellow]note:[/] {escape(hint)}")


@app.command("run")
def run_cmd(
    name: BoxArg,
    job: Annotated[list[str] | None, typer.Argument(
        metavar="JOB.yaml | -- CMD...", show_default=False,
        help="The job spec, or after -- a command to run with this directory as the workdir "
             "(its words joined by spaces, run by the box's shell, as ssh does).")] = None,
    output: Annotated[list[str] | None, typer.Option(
        "--output", metavar="PATH", show_default=False,
        help="With -- CMD: a file or directory (in the workdir) the command writes, for pull "
             "to fetch and verify; repeatable. A spec names them in `outputs`.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what the box would be "
                                                            "given (Slurm's batch script, "
                                                            "Kubernetes' manifests; on an SSH "
                                                            "or local box the runner's command, "
                                                            "env names and the files pushed); "
                                                            "send nothing.")] = False,
    after: Annotated[str | None, typer.Option(
        "--after", help="Start only once this earlier run (id, its start or end) succeeded: chains "
                        "stages (Slurm --dependency=afterok).")] = None,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Start training over: move the job's checkpoint home aside (kept, "
                        "never deleted) instead of resuming from it.")] = False,
    detach: Annotated[bool, typer.Option(
        "--detach", "-d", help="Return once the run has started instead of following its "
                               "log (the default when stdout is not a terminal).")] = False,
    streams: StreamsOpt = None,
    skip_resource_check: Annotated[bool, typer.Option(
        "--skip-resource-check", help="Run without measuring the spec's resources (gpu, "
                                      "cpus, mem, disk, nodes) against the box; the run's "
                                      "record says so.")] = False,
    down_after: Annotated[bool, typer.Option(
        "--down", help="Take the box down when the run ends: a watcher on this machine "
                       "(it outlives the terminal) pulls and verifies every run, then runs "
                       "`rgt down`'s checks and teardown. This flag is your confirmation; a run "
                       "that fails, or a pull that does not verify, keeps the box up.")] = False,
    infra: InfraOpt = None,
    instance_type: InstanceTypeOpt = None,
) -> None:
    """Push the workdir, send secrets on stdin, start the job detached, and follow its log.

    In a terminal the log streams until the run ends (exit codes as `watch --until-done`);
    Ctrl-C stops following, never the run. With -d, or when stdout is not a terminal (scripts),
    it prints the run id and returns.

    `rgt run BOX -- python train.py --lr 0.1` needs no spec: the current directory is pushed
    as the workdir and the job is named after it.
    """
    fixed = streams_flag(streams)
    store = Store()
    from rgt.cli import pipeline_run  # a SkyPilot pipeline: its stages as chained jobs

    overrides = skycloud.overrides(infra, instance_type, f"box {name}",
                                   store.box(name).profile) \
        if infra is not None or instance_type is not None else None
    chain = pipeline_run.pipeline_file(job or [], "--" in sys.argv[1:])
    if chain is not None:
        return pipeline_run.run_pipeline(store, name, chain, after=after, dry_run=dry_run,
                                         fresh=fresh, streams=fixed, down=down_after,
                                         skip_resource_check=skip_resource_check,
                                         outputs=output or [], overrides=overrides)
    spec = _job_spec(name, job or [], output or [], overrides)
    if down_after and not dry_run:  # refused before anything is pushed, not after the run
        from rgt.lifecycle import autodown

        autodown.check_stoppable(store.box(name))
    if dry_run:
        print(render_mod.dry_run(store, name, spec, after=after,
                                 skip_resource_check=skip_resource_check), end="")
        return
    with transfer_bar("push") as on_progress:
        run, notes = launch.launch(store, name, spec, after=after, fresh=fresh,
                                   progress=on_progress, streams=fixed,
                                   skip_resource_check=skip_resource_check)
    grace = load_profile(store.box(name).profile).facts.spot_grace
    notes += save_hints.hints(spec.workdir, None if grace == "n/a" else grace,
                              commands=[spec.run])
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    cells = (run.spec.get("platform_run") or {}).get("cells")
    what = f"a sweep of {cells} cells" if cells else "run"
    console.print(f"[green]✓[/] started {what} [bold]{run.id}[/] on {name} "
                  f"({escape(str(run.spec['detach']))}); it survives this terminal closing")
    if down_after:
        _arm_down(store, name, run.id)
    if detach or not sys.stdout.isatty():
        console.print(f"Watch: [bold]rgt watch {name} --follow[/]")
        print(run.id)
        return
    print(run.id)
    console.print("following the log; Ctrl-C stops following, the run goes on", style="dim")
    try:
        watch(name, run.id, follow=True, until_done=False, timeout=None, as_json=False,
              give_up_after=watch_mod.UNREACHABLE_GIVE_UP_S)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]detached:[/] run {run.id} goes on. Watch: [bold]rgt watch "
                      f"{name} --follow[/] · pull: [bold]rgt pull {name} {run.id}[/] · "
                      f"cancel: [bold]rgt cancel {name} {run.id}[/]")


def _arm_down(store: Store, name: str, run_id: str) -> None:
    """`run --down`: the watcher that pulls and takes the box down once the run ends."""
    from rgt.lifecycle import autodown

    pid = autodown.arm(store, store.box(name), after_run=run_id, by=f"rgt run {name} --down")
    console.print(f"[green]✓[/] --down: once {run_id} ends, watcher pid {pid} pulls and verifies "
                  f"every run, then takes {name} down (a failed run keeps it up); `rgt ls` "
                  f"shows it, log {escape(str(autodown.log_path(name)))}")


def _job_spec(box: str, words: list[str], outputs: list[str], overrides=None):
    """The spec file named, or the inline job of `rgt run BOX -- CMD …`: a command only after
    a `--`, so that a mistyped spec name is never run on the box as a command."""
    if "--" in sys.argv[1:] and words:
        if overrides is not None:
            raise UserError("--infra and --instance-type override a SkyPilot task file's "
                            "placement; a command after -- runs on the box you name as it is")
        from rgt.lifecycle.inline_job import inline_spec

        spec = inline_spec(words, outputs=outputs)
        if not outputs:  # the Iron Law checks what pull fetches: here, nothing the job wrote
            console.print("[yellow]note:[/] no --output: `rgt pull` fetches the log and the "
                          "checkpoint home ($RGT_CKPT_DIR) only, and `rgt down` loses files the "
                          "command writes elsewhere; name them with --output PATH")
        return spec
    if outputs:
        raise UserError("--output is for `rgt run BOX -- CMD`; a spec names its outputs in "
                        "`outputs:`")
    if len(words) != 1:
        raise UserError(f"give the job: `rgt run {box} JOB.yaml`, or a command after --: "
                        f"`rgt run {box} -- python train.py`")
    return load_spec(Path(words[0]), overrides=overrides)


@app.command("render")
def render_cmd(
    spec_file: Annotated[Path, typer.Argument(help="The job spec (or a SkyPilot task YAML).")],
    profile: Annotated[str, typer.Option("--profile", "-p", help="Platform profile (slurm, "
                                                                 "kubernetes).")
                                  ] = DEFAULT_PROFILE["render"],
    data_dir: Annotated[str | None, typer.Option(help="The box's DATA_DIR to write in.")
                        ] = None,
    durable_dir: Annotated[str | None, typer.Option(
        help="The box's DURABLE_DIR to write in (default: the profile's, for user USER).")
                           ] = None,
    gpu: cloud.GpuOpt = None,
    cpus: cloud.CpusOpt = None,
    mem: cloud.MemOpt = None,
    nodes: cloud.NodesOpt = None,
    time_: cloud.TimeOpt = None,
    image: Annotated[str | None, typer.Option(
        help="Kubernetes: the box's image, pinned by digest (REG/IMG@sha256:…), as `rgt up "
             "--image`; the spec's kubernetes.image overrides it.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write it to this file instead of stdout (Colab: the notebook "
                               "to open, train.ipynb).")] = None,
    infra: InfraOpt = None,
    instance_type: InstanceTypeOpt = None,
) -> None:
    """Print what a platform would submit for a job, without any box or cluster.

    Slurm: the sbatch script; Kubernetes: the manifests (multi-document YAML); Colab: the
    notebook, the workdir inside it (-o train.ipynb); Kaggle: kernel-metadata.json and the
    kernel script. The resource
    flags are defaults the spec's own `resources` override, as on a box `rgt up` made.
    """
    resources, _ = cloud.up_request(gpu=gpu, cpus=cpus, mem=mem, nodes=nodes, time=time_)
    overrides = skycloud.overrides(infra, instance_type, f"profile {profile}", profile)
    text = render_mod.render(load_spec(spec_file, overrides=overrides), profile,
                             data_dir=data_dir, durable_dir=durable_dir, resources=resources,
                             options={"image": image} if image else None)
    if output is None:
        print(text, end="")
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise UserError(f"-o {output}: cannot write it ({err.strerror})") from None
    console.print(f"[green]✓[/] wrote {escape(str(output))}")


@app.command()
def logs(name: BoxArg, run_id: RunArg = None,
         tail: Annotated[int | None, typer.Option("--tail", "-n", help="Last N lines.")] = None,
         cell: Annotated[int | None, typer.Option(help="A sweep's cell (default: every cell, "
                                                       "each under a header).")] = None,
         raw: Annotated[bool, typer.Option(
             "--raw", help="The bytes as the box wrote them: terminal escapes (titles, "
                           "clipboard, links, cursor moves) and long lines not filtered.")
                        ] = False,
         follow: Annotated[bool, typer.Option(
             "--follow", "-f", help="Stream the log until the run ends (exit code as `watch "
                                    "--until-done`); Ctrl-C stops following, not the run.")
                           ] = False,
         node: Annotated[int | None, typer.Option(
             help="A multi-node run's node, by rank (default: the head's, 0).")] = None,
         ) -> None:
    """Print the run's log (stdout and stderr, unbuffered).

    Its last 8 MiB at most, colours and carriage returns kept, other terminal escapes removed,
    lines over 64 KiB cut; --raw gives the bytes as the box has them."""
    store = Store()
    box = store.box(name)
    run = store.run(box.name, run_id)
    if follow:
        given = [flag for flag, value in (("--tail", tail), ("--cell", cell), ("--raw", raw),
                                          ("--node", node)) if value not in (None, False)]
        if given:
            raise UserError(f"-f streams the whole log, filtered, from its start: drop "
                            f"{' and '.join(given)} (or drop -f)")
        _follow_log(store, box, run)
        return
    text = watch_mod.read_log(box, run, tail, cell, raw=raw, node=node)
    if isinstance(text, (bytes, bytearray)):
        sys.stdout.flush()
        sys.stdout.buffer.write(text)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text)


def _follow_log(store: Store, box, run) -> None:
    """`logs -f`: the log as it grows, then the run's end as `watch --until-done` exits."""
    try:
        summary = watch_mod.follow(store, box, run, write_through, say=say_waiting)
    except KeyboardInterrupt:
        err_console.print(f"\nstopped following; run {run.id} goes on", style="dim")
        raise typer.Exit(0) from None
    if summary["status"] != "succeeded":
        err_console.print(f"run {run.id} ended {escape(str(summary['status']))}"
                          + (f" (exit {summary['exit_code']})"
                             if summary.get("exit_code") is not None else ""), style="yellow")
        raise typer.Exit(watch_mod.EXIT_CANCELLED if summary["status"] == "cancelled"
                         else watch_mod.EXIT_FAILED)


@app.command()
def pull(name: BoxArg, run_id: RunArg = None,
         dest: Annotated[str | None, typer.Option(
             help="Local directory (default ./rgt-results/<box>/<run>); not a job's "
                  "workdir, which the next run would push back.")] = None,
         from_scratch: Annotated[bool, typer.Option(
             "--from-scratch", help="Fetch the outputs from the run's workdir, for a run whose "
                                    "copy to the durable tier failed (sync-failed).")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout "
                                                              "(README: JSON output).")] = False,
         streams: StreamsOpt = None,
         checkpoints: Annotated[str | None, typer.Option(
             "--checkpoints", metavar="latest|all|N",
             help="Which of the job's checkpoints to bring: the newest that verifies "
                  "(latest, the default), all, or the newest N. Older ones left on the box "
                  "are named, and `rgt down` destroys them.")] = None,
         every: Annotated[bool, typer.Option(
             "--all", help="Every run `rgt down` would refuse over that has ended (each under "
                           "--dest/<run> with --dest); live runs are named, not pulled.")
                          ] = False,
         ) -> None:
    """Fetch the run's outputs and checkpoints, re-hash them here, load every checkpoint.

    Of the job's checkpoint home it brings the newest checkpoint that verifies (and every file
    that is not a checkpoint); older checkpoints on request (--checkpoints all or N).
    """
    fixed = streams_flag(streams)
    keep = checkpoints_flag(checkpoints)
    if dest is not None and not dest.strip():
        raise UserError("--dest is empty: name a directory to pull into, or leave --dest out "
                        "for ./rgt-results/<box>/<run>")
    store = Store()
    if every:
        _pull_all(store, name, run_id, dest, as_json=as_json, from_scratch=from_scratch,
                  streams=fixed, checkpoints=keep)
        return
    report = _pull_one(store, name, run_id, None if dest is None else Path(dest),
                       as_json=as_json, from_scratch=from_scratch, streams=fixed,
                       checkpoints=keep)
    if as_json:
        print_json("pull", box=name, pull=report)
    if not report["ok"]:
        raise typer.Exit(1)


def _pull_all(store: Store, name: str, run_id: str | None, dest: str | None, *,
              as_json: bool, **how) -> None:
    """`pull --all`: one pull after another, each said as `pull` says it; exit 1 if any did
    not verify."""
    from rgt.lifecycle import every_run

    if run_id is not None:
        raise UserError(f"--all pulls every run that needs it; drop the run id {run_id!r} "
                        "or --all")
    found = every_run.runs_to_pull(store, name)
    reports = []
    for run in found.runs:
        if not as_json:
            console.print(f"[bold]pull {escape(run.id)}[/]")
        where = None if dest is None else Path(dest) / run.id
        try:
            reports.append(_pull_one(store, name, run.id, where, as_json=as_json, **how))
        except UserError as err:  # one run's trouble (its files, the link) stops only it
            reports.append({"run": run.id, "ok": False, "problems": [str(err)]})
            if not as_json:
                err_console.print(f"[red]✗[/] {escape(run.id)}: {escape(str(err))}")
    live = [run.id for run in found.live]
    if as_json:
        print_json("pull", box=name, pulls=reports, live=live, settled=found.settled)
    else:
        for run_id_ in live:
            console.print(f"[yellow]not pulled:[/] {escape(run_id_)} is still running; "
                          f"`rgt pull {escape(name)} --all` again once it ends")
        done = sum(1 for r in reports if r["ok"])
        already = f"{found.settled} already pulled and verified after their end"
        if reports:
            console.print(f"pulled and verified {done} of {len(reports)} run"
                          f"{'s' * (len(reports) != 1)} that needed it"
                          + (f"; {already}" if found.settled else ""))
        elif not live:
            console.print(f"nothing to pull on {escape(name)}: {already}")
    if any(not r["ok"] for r in reports):
        raise typer.Exit(1)


def _pull_one(store: Store, name: str, run_id: str | None, dest: Path | None, *,
              as_json: bool, from_scratch: bool, streams: int, checkpoints: int | None
              ) -> dict:
    """One run's pull, and (without --json) what it brought and whether it verified."""
    with transfer_bar("pull", quiet=as_json) as on_progress:
        report = pull_mod.pull(store, name, run_id, dest, on_progress,
                               from_scratch=from_scratch, streams=streams,
                               checkpoints=checkpoints)
    if as_json:
        return report
    where = report["dest"]
    print_checkpoints(report)
    for note in report.get("notes") or []:
        console.print(f"[dim]note:[/] {escape(note)}")
    for warning in report.get("warnings") or []:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    if report["ok"]:
        console.print(f"[green]✓ verified[/] {report['counts']['files']} files in "
                      f"{escape(str(where))} (hashes match the box; checkpoints checked by "
                      f"format); evidence: {escape(report['evidence'])}")
        return report
    for problem in report["problems"]:
        err_console.print(f"[red]✗[/] {escape(problem)}")
    return report


EXIT_WAITING_FOR_YOU = 4  # `down --yes` where only the user can stop the meter: not down


@app.command()
def down(
    name: BoxArg,
    yes: Annotated[bool, typer.Option("--yes", help="Skip the prompt (only with verified "
                                                    "evidence for every run).")] = False,
    discard_results: Annotated[bool, typer.Option(
        "--discard-results", help="Give up unpulled results (always asks).")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="A refusal as one JSON document on stdout (still exit 3).")] = False,
) -> None:
    """Stop the meter — only after every run is pulled and verified (the Iron Law).

    Where rgt cannot stop the meter itself (a box rented in a console), the box is down only
    by your typed word that you stopped it there; `--yes` then records it as waiting for you
    and exits 4, not down.
    """
    store = Store()
    plan = down_mod.plan_down(store, name)
    if plan.resumed is not None:  # a `down` cut short: finish that teardown, confirmed then
        console.print(escape(down_mod.down_journal.resuming_line(plan.resumed)))
        outcome = down_mod.execute_down(store, plan, discarded=plan.resumed.plan["discarded"])
        by = down_mod.stopped_by(plan.resumed.plan["kind"])
        console.print(f"[green]✓[/] {name} is down{' by your word' * (by != 'rgt')}: "
                      f"{escape(outcome)}")
        for billing in facts(store.box(name)).still_billing or []:
            console.print(f"[yellow]still billing:[/] {escape(billing)}")
        return
    if not plan.safe and not discard_results:
        refused = down_mod.refusal(plan)  # with what the box said instead of an answer
        if as_json:
            print_json("down", box=name, refused=True, reason=str(refused), live=plan.live,
                       unverified=plan.unverified, unreachable=plan.unreachable or None)
        raise refused
    if not plan.safe and yes:
        raise down_mod.IronLawRefusal("--yes cannot give results up; run without --yes and "
                                      "type the box name to confirm --discard-results")
    stop = plan.profile.meter_stop
    lines = [f"meter-stop verb: [bold]{escape(plan.profile.facts.meter_stop_verb)}[/]"
             + (" — [bold red]cannot be undone[/]" if stop.irreversible else " — reversible")]
    if plan.deletes is not None:  # a local box: exactly what rgt created and will remove
        lines += [f"[red]deletes[/] {escape(p)}" for p in plan.deletes] or ["deletes nothing"]
        kept = dict.fromkeys([plan.box.durable_dir, plan.box.data_dir])
        lines += [f"[green]keeps[/]   {escape(p)}" for p in kept if p not in plan.deletes]
    else:
        lines += [f"[red]destroys[/] {escape(t)}" for t in plan.lost_tiers]
        lines += [f"[green]keeps[/]    {escape(t)}" for t in plan.kept_tiers]
    lines += [f"[yellow]still billing after[/] {escape(b)}" for b in plan.still_billing]
    lines += [f"[red]destroys[/] {escape(left)}" for left in plan.left_behind]
    lines += [f"[cyan]note[/] {escape(n)}" for n in plan.notes]
    if stop.timer:
        lines.append(f"[yellow]timer[/] {escape(stop.timer.after)}: {escape(stop.timer.effect)}")
    if not plan.automated:
        lines.append(f"[bold]do this in the console:[/] {escape(stop.how or stop.name)}")
    if not plan.safe:
        lines += [f"[bold red]NOT PULLED[/] {escape(r)}" for r in plan.live + plan.unverified]
    console.print(Panel("\n".join(lines), title=f"down {name}", expand=False))
    word = down_mod.needs_your_word(plan)  # only the user can stop this meter
    if word and yes:
        how = down_mod.await_console_stop(store, plan)
        console.print(f"[yellow]![/] {name} is [bold]not down[/]: rgt cannot stop its meter, "
                      f"and --yes is not your word that you did. Do this in the console: "
                      f"{escape(how)}; then `rgt down {name}` and type its name. Until then "
                      "`rgt ls` shows it waiting for you")
        raise typer.Exit(EXIT_WAITING_FOR_YOU)
    if not yes:
        instead = (f"`echo {name} | rgt down {name} --discard-results` (results are given up "
                   "only by a typed name, never by --yes)" if not plan.safe else
                   f"`echo {name} | rgt down {name}` once it is stopped in the console"
                   if word else f"`rgt down {name} --yes`")
        question = (f"Once it is stopped in the console, type the box name ({name}) to record "
                    "that you did" if word else f"Type the box name ({name}) to confirm")
        if not typed_name(question, name, verb="down", unchanged="nothing was changed",
                          instead=instead):
            raise UserError("confirmation did not match; nothing was done", exit_code=1)
    outcome = down_mod.execute_down(store, plan, discarded=not plan.safe)
    console.print(f"[green]✓[/] {name} is down{' by your word' * word}: {escape(outcome)}")
    for billing in facts(store.box(name)).still_billing or []:
        console.print(f"[yellow]still billing:[/] {escape(billing)}")
