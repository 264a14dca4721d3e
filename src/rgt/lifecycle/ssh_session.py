"""`rgt ssh BOX [-- CMD]`: the ssh command line that reaches a box as rgt reaches it.

The same endpoint, key, known_hosts file (strict: a changed host key is refused), jump hosts
and ssh config as rgt's own commands, on a connection of its own so that port forwards close
with the session. `--port N` is `-L N:127.0.0.1:N` with the URL to open said first.

On Slurm the box is the login node; while a run of the box is live in the queue, the session
goes on to that run's first allocated node (`srun --jobid --overlap`), and `--port` forwards
to that node. On a group (several machines, one box) the session is the head's, node 0;
`--node N` reaches node N by its own record (endpoint, key, jump hosts), as rgt's commands
reach it, and its forwards are that node's. Boxes rgt does not reach over SSH (this machine,
Kubernetes, notebooks) are refused by name with what to run instead.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from rgt.errors import UserError
from rgt.platforms import platform_for
from rgt.profiles import load_profile
from rgt.remote import group
from rgt.store import LIVE, Box, Run, Store
from rgt.transport import SshTransport

_FORWARD = re.compile(r"^[\w.:\[\]/*-]+$")  # [bind:]port:host:hostport, or a socket path


@dataclass
class Session:
    argv: list[str]  # ssh and its arguments, ready to exec
    urls: list[str] = field(default_factory=list)  # what --port opened, to print first
    notes: list[str] = field(default_factory=list)  # where the session lands, when not plain


def port_pair(text: str) -> tuple[int, int]:
    """`--port N` or `--port LOCAL:REMOTE` as (local, remote)."""
    parts = text.split(":")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) not in (1, 2) or not all(0 < n < 65536 for n in numbers):
        raise UserError(f"--port {text}: give a port (6006) or LOCAL:REMOTE (16006:6006), "
                        "each 1-65535")
    return numbers[0], numbers[-1]


def session(store: Store, box_name: str, command: list[str], *, local: list[str],
            remote: list[str], ports: list[str], no_shell: bool, tty: bool,
            node: int | None = None) -> Session:
    """The ssh argv for `rgt ssh`; refused by name where the box is not reached over SSH.
    NODE: a group's node by rank (default: the head, 0), reached as rgt reaches it."""
    box = store.box(box_name)
    if box.state != "up":
        raise UserError(f"box {box.name} is {box.state}: nothing to ssh into (`rgt ls --all`)")
    if command and no_shell:
        raise UserError("-N opens the forwards only: drop -N or the command")
    for spec in (*local, *remote):
        if not _FORWARD.match(spec):
            raise UserError(f"forward {spec!r}: ssh's form is [BIND:]PORT:HOST:HOSTPORT "
                            "(-L 8888:127.0.0.1:8888)")
    pairs = [port_pair(p) for p in ports]
    members = group.nodes(box)
    transport = _ssh_transport(box)  # a box not reached over SSH is refused as that first
    run, label, notes = _live_run(store, box), "", []
    if node is not None:
        picked = group.pick(members, node, whose=f"box {box.name}",
                            alone=f"box {box.name} is one machine, not a group")
        notes.append(f"node {picked.rank} of {len(members)} ({picked.address})")
        if picked.rank:  # that node's own record: its endpoint, key, jump hosts
            transport, run, label = _ssh_transport(picked.box), None, f" (node {picked.rank})"
    elif members:
        last = len(members) - 1
        notes.append(f"the head, node 0 of {len(members)} ({members[0].address}); "
                     + (f"`rgt ssh {box.name} --node 1` reaches node 1" if last == 1 else
                        f"`rgt ssh {box.name} --node N` reaches node N (1-{last})"))
    job = (run.spec.get("platform_run") or {}) if run else {}
    node_host = "127.0.0.1"
    remote_words = list(command)
    # a scheduler's job runs on a node of its own: the session goes on there
    found = _first_node(transport, str(job["job_id"])) if job.get("job_id") and \
        load_profile(box.profile).facts.jobs_on_other_nodes else None
    if found:
        node_host = found
        remote_words = _srun_words(str(job["job_id"]), command)
        tty = tty or not command
        notes.append(f"login node {transport.where}, then run {run.id}'s node {node_host} "
                     f"(Slurm job {job['job_id']}: srun --overlap)")
    elif platform_for(box.profile).per_job_resources:  # a scheduler's login node
        notes.append(f"the login node {transport.where}: no run of {box.name} holds a node "
                     "in the queue now")
    argv = [*transport.session_argv()]
    if pairs or local or remote:
        argv += ["-o", "ExitOnForwardFailure=yes"]  # a taken port is an error, not a shrug
    for here, there in pairs:
        argv += ["-L", f"127.0.0.1:{here}:{node_host}:{there}"]
    for spec in local:
        argv += ["-L", spec]
    for spec in remote:
        argv += ["-R", spec]
    if no_shell:
        argv.append("-N")
    elif tty:
        argv.append("-t")
    # `--` first: ssh reads options after the destination too, and a command's own `-x`
    # must reach the box, not ssh
    argv += ["--", transport.target.host]
    if remote_words and not no_shell:
        argv += remote_words
    urls = [f"http://127.0.0.1:{here} → port {there} on {box.name}{label}"
            + (f" ({node_host})" if node_host != "127.0.0.1" else "") for here, there in pairs]
    return Session(argv=argv, urls=urls, notes=notes)


def _ssh_transport(box: Box) -> SshTransport:
    """The box's SSH transport, or a refusal saying what reaches this kind of box."""
    if box.is_local:
        raise UserError(f"box {box.name} is this machine (--profile {box.profile}): nothing "
                        f"to ssh into; its runs are under {box.data_dir}/rgt")
    if "context" in box.connection:  # a Kubernetes namespace: pods, reached by kubectl
        raise UserError(_kubectl_hint(box))
    transport = platform_for(box.profile).connect(box) if "host" in box.connection else None
    if not isinstance(transport, SshTransport):
        raise UserError(f"box {box.name} (--profile {box.profile}) is not reached over SSH: "
                        f"`rgt logs {box.name} -f` follows its runs, `rgt watch {box.name}` "
                        "shows their state")
    return transport


def _kubectl_hint(box: Box) -> str:
    where = " ".join(f"--{key} {shlex.quote(str(box.connection[key]))}"
                     for key in ("context", "namespace") if box.connection.get(key))
    return (f"box {box.name} is a Kubernetes namespace: rgt opens no shell in a pod; kubectl "
            f"does: `kubectl {where} get pods -l rgt.dev/run` lists the runs' pods, then "
            f"`kubectl {where} exec -it POD -- bash` or `kubectl {where} port-forward POD "
            "6006:6006`")


def _live_run(store: Store, box: Box) -> Run | None:
    """The box's newest run that the store last saw live (on Slurm: its job is the node)."""
    live = [run for run in store.runs(box.name) if run.status in LIVE]
    return live[-1] if live else None


def _first_node(transport: SshTransport, job_id: str) -> str | None:
    """The first node of the job's allocation as Slurm names it now; None when the job holds
    none (it ended since the store last saw it, or waits in the queue)."""
    quoted = shlex.quote(job_id)
    result = transport.run(f"scontrol show hostnames \"$(squeue -h -j {quoted} -t R -o %N)\" "
                           "2>/dev/null | head -n 1", check=False, timeout=30)
    node = result.stdout.strip()
    return node if result.ok and re.fullmatch(r"[\w.-]+", node) else None


def _srun_words(job_id: str, command: list[str]) -> list[str]:
    """The login node's command that enters the job's first node: one task, sharing the
    job's resources (--overlap, Slurm 20.11+), a login shell or the user's command."""
    srun = ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1"]
    if not command:
        return [*srun, "--pty", "bash", "-l"]
    return [*srun, "bash", "-lc", shlex.quote(" ".join(command))]
