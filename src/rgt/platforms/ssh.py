"""`SshPlatform`: every verb for a box that answers a shell, over SSH or on this machine.

local, generic-ssh and AutoDL use it as it is (the user rented the machine; rgt registers
it). Lambda and vast.ai subclass it for `provision` (rent through an API, then register) and
`release` (terminate / destroy); Slurm for `launch` (sbatch), `state` (squeue/sacct) and
`release` (scancel).
"""

from __future__ import annotations

import shlex
from typing import Any

from rgt.boxread import MAX_LOG_BYTES, STALL_S, LogChunk
from rgt.errors import UserError
from rgt.platforms.base import (
    Launched,
    Platform,
    Released,
    Request,
    asked_for,
    refuse_unsupported,
)
from rgt.profiles import load_profile
from rgt.remote import group, group_meet
from rgt.remote.calls import run_json
from rgt.remote.layout import Layout
from rgt.remote.reach import transport_for
from rgt.remote.register import register
from rgt.remote.runner import start_runner, wait_for_state
from rgt.remote.summary import summarize
from rgt.spec import JobSpec
from rgt.store import Box, Run, Store
from rgt.transport import Transport


def flags(request: Request) -> list[str]:
    """The resource and option flags a request carries, as `rgt up` spells them."""
    names = asked_for(request.resources) + [k for k in request.options
                                            if k not in SshPlatform.CONNECTION]
    return ["--" + ("secret" if n == "secrets" else n).replace("_", "-") for n in names]


class SshPlatform(Platform):
    """A machine the user already has: rgt registers it, runs the job under the on-box runner,
    probes it, reads its log with `tail`, pulls with rgt's transfer engine, and can stop no
    meter (the user does, in the platform's console, as `rgt down` shows)."""

    def connect(self, box: Box) -> Transport:
        return transport_for(box)

    rents = False  # True: without --ssh/--host, `provision` rents through `rent`
    census = True  # the runner runs in the box's shell: probe --census sees every live run
    CONNECTION = ("identity", "user", "port", "ssh_config")  # for the rented instance's SSH

    def provision(self, store: Store, request: Request) -> Box:
        """Rent (a platform that `rents`, asked without --ssh/--host), or register the
        machine the request names. A flag that fits neither is refused before anything."""
        if request.target is None and self.rents:
            return self.rent(store, request)
        given = flags(request)
        if self.rents and given:
            raise UserError(f"{' '.join(given)} rent a new instance through the API, but "
                            "--ssh/--host register one you already rented: give one or the other")
        # A machine someone else rented is what it is: nothing in `resources` can change it.
        refuse_unsupported(self.profile, self.supports, request.resources)
        options = {k: v for k, v in request.options.items() if k not in self.CONNECTION}
        if options:
            raise UserError(f"--{next(iter(options)).replace('_', '-')} does not apply to "
                            f"--profile {self.profile}: it registers a machine you already "
                            "have, given with --ssh/--host")
        if any(k in request.options for k in self.CONNECTION):
            raise UserError("--port/--user/--identity need --host (or paste --ssh 'ssh ...')")
        return self.register(store, request)

    def register(self, store: Store, request: Request) -> Box:
        if request.group:  # several machines, one box (rgt.remote.group)
            return group.register(store, request.name, load_profile(self.profile),
                                  [request.target, *request.group], rate=request.rate,
                                  data_dir=request.data_dir, durable_dir=request.durable_dir)
        return register(store, request.name, load_profile(self.profile), request.target,
                        rate=request.rate, data_dir=request.data_dir,
                        durable_dir=request.durable_dir)

    def rent(self, store: Store, request: Request) -> Box:
        """Rent an instance through the platform's API and register it (`rents` = True)."""
        raise UserError(f"{self.profile} does not rent through rgt: rent in the console, then "
                        "`rgt up NAME --ssh '…'`")

    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched:
        profile = load_profile(box.profile)
        if spec.resources.nodes > 1:
            return self._launch_group(transport, box, spec, layout, profile)
        detach = start_runner(transport, profile, spec, layout)
        notes = []
        if detach == "setsid" and profile.facts.detach_primitive.startswith("tmux"):
            notes.append("no tmux on the box: the run is detached with setsid instead (it "
                         "outlives this connection all the same; `rgt watch` follows it)")
        status = wait_for_state(transport, layout).get("status", "starting")
        return Launched(detach=detach, status=str(status), notes=notes)

    def _launch_group(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout,
                      profile) -> Launched:
        """One runner per node, each with its rank (rgt.remote.group)."""
        def start(node_transport: Transport, node_spec: JobSpec, node_layout: Layout
                  ) -> tuple[str, str]:
            detach = start_runner(node_transport, profile, node_spec, node_layout)
            state = wait_for_state(node_transport, node_layout)
            return detach, str(state.get("status", "starting"))
        started = group.launch(box, transport, spec, layout.run_id, start)
        (detach, status), count = started[0], len(started)  # the head's says the run's
        return Launched(detach=detach, status=status,
                        platform_run={"nodes": spec.resources.nodes},
                        notes=[f"started on {count} nodes, ranks 0-{count - 1}"
                               f" (head {group.nodes(box)[0].address})"])

    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]:
        """The on-box probe: state.json reconciled with the process table, boot id, OOM; on
        every node of a multi-node run."""
        count = group.run_nodes(run)
        if count > 1:
            info = run.spec.get("platform_run") or {}
            silent = dict(info.get("silent") or {})
            summary = group.state(box, run.id, count, transport, stop=group.stop_runner,
                                  silent=silent, lost_after=group.lost_after())
            if silent != (info.get("silent") or {}):  # kept between polls: since when
                run.spec = {**run.spec, "platform_run": {**info, "silent": silent}}
                store.update_run(run.id, spec=run.spec)
            return summary
        return summarize(run_json(transport, "probe", run.remote_dir, "--dirs", box.data_dir,
                                  box.durable_dir, timeout=60))

    def logs(self, transport: Transport, box: Box, run: Run, *, lines: int | None = None,
             cell: int | None = None, since_byte: int | None = None) -> str:
        """RUN_DIR/log; for a sweep, one cell's log, or every cell's with a header each.
        `since_byte` (`watch --follow`): RUN_DIR/log from that byte on."""
        info = run.spec.get("platform_run") or {}
        cells = info.get("cells") or 0
        if cell is not None and not 0 <= cell < cells:
            raise UserError(f"run {run.id} has no cell {cell}"
                            + (f" (cells 0-{cells - 1})" if cells else " (it is not a sweep)"))
        if lines is not None and lines < 0:
            raise UserError(f"--tail/-n takes a number of lines >= 0, not {lines}")
        if since_byte is not None:  # what was written since the last poll, a budget's worth
            log = shlex.quote(f"{run.remote_dir}/log")
            got = transport.run(f"[ -f {log} ] && tail -c +{int(since_byte) + 1} {log} | "
                                f"head -c {MAX_LOG_BYTES}", check=False, timeout=300,
                                limit=MAX_LOG_BYTES, idle=STALL_S)
            return LogChunk(got.data, cut=got.truncated)
        if cells:
            chosen = [cell] if cell is not None else range(cells)
            paths = [str(info["log"]).replace("%a", str(i)) for i in chosen]
        else:
            paths = [f"{run.remote_dir}/log"]
        quoted = " ".join(shlex.quote(p) for p in paths)
        if lines == 0:  # `tail -n 0` prints nothing, which is what was asked; no round trip
            return ""
        # tail prints "==> file <==" between files, which is what tells the cells apart; the
        # box sends the last MAX_LOG_BYTES at most, whatever its lines' length (one tqdm line
        # can be a GB), and the laptop reads no more than that
        command = (f"set -o pipefail; tail -n {int(lines)} {quoted} | tail -c {MAX_LOG_BYTES}"
                   if lines else f"tail -c {MAX_LOG_BYTES} {quoted}")
        result = transport.run(command, check=False, timeout=60, limit=MAX_LOG_BYTES)
        if not result.ok and not result.data and not result.truncated:
            raise UserError(f"no log yet for run {run.id} on {box.name}")
        return LogChunk(result.data, cut=result.truncated or len(result.data) >= MAX_LOG_BYTES)

    def release(self, store: Store, box: Box) -> Released:
        """Nothing rgt can stop: the user stops the meter the profile's way (console)."""
        if box.is_local and load_profile(box.profile).facts.kind == "local":
            return Released("this machine: nothing bills, nothing to stop")
        stop = load_profile(box.profile).meter_stop
        members = group.nodes(box)
        if members:  # a group: each machine bills until its own meter is stopped
            return Released(f"rgt cannot stop these {len(members)} meters itself: "
                            f"{stop.how or stop.name}",
                            still_billing=[f"{box.name} {group.describe(n)} until you "
                                           f"{stop.name} it in the console" for n in members])
        return Released(f"rgt cannot stop this meter itself: {stop.how or stop.name}",
                        still_billing=[f"{box.name} until you {stop.name} it in the console"])

    def audit_extras(self, transport: Transport, box: Box) -> dict[str, Any]:
        return group_meet.audit(box, transport)  # {} for one machine

    def stops_meter(self, box: Box) -> bool:
        return load_profile(box.profile).facts.kind == "local"  # this machine bills nothing
