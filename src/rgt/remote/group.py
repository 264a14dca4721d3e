"""A box of several machines, one job across them: a group of SSH machines the user has
(`rgt up NAME --ssh 'ssh a' --ssh 'ssh b'`) or instances a platform rented together.

The box's own connection and directories are its head node's (rank 0), so every verb that
talks to "the box" talks to the head; `Box.extra["nodes"]` lists every node, head first, each
as the one-machine box it is (its connection, directories, interpreter) and the address the
other nodes reach it at. What a group adds is here, in one place:

- `register`: each machine examined as `rgt up` examines one, in parallel, stored as one box;
- `on_every_node`: run a per-machine step (push, copy, start) on all nodes at once, so N nodes
  start in about the time of one; a node that fails is named;
- `launch`: one on-box runner per node with the multi-node contract (`rgt.remote.node_env`:
  rank, node count, every address, MASTER_ADDR …), an rgt spec's `run` under torchrun
  (`rgt.remote.launchers`);
- `state`: every node probed; the run is what torchrun makes of its nodes — it succeeded when
  every node did, and one node that ended otherwise ends the run as failed: the ranks still
  running are stopped (they would wait on a dead peer until a collective times out);
- `seed_checkpoints`: without a shared filesystem each node has its own checkpoint home; a
  relaunch gives every node the head's (rank 0 writes the checkpoints), through the laptop.

Whether the nodes can meet on the head's rendezvous port (before a run, and `rgt audit`) is
rgt.remote.group_meet's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from rgt.errors import UserError
from rgt.profiles import Profile
from rgt.remote import launchers, node_env
from rgt.remote.calls import run_json
from rgt.remote.layout import Layout
from rgt.remote.reach import transport_for
from rgt.remote.register import examine
from rgt.remote.summary import summarize
from rgt.spec import JobSpec
from rgt.store import TERMINAL, Box, Store
from rgt.transport import SshTarget, Transport

T = TypeVar("T")
ADDRESS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}$")
NODE_KEYS = ("connection", "address", "data_dir", "durable_dir", "python", "python_version",
             "python_executable", "uname", "created_dirs", "instance_id")
# where node i of a run writes its log when the nodes share the run's directory (the head's
# is `log`): a platform whose nodes share a filesystem (Kubernetes' claim) writes it so
SHARED_NODE_LOG = "log.node-{rank}"
ENV_NPROC_PER_NODE = "RGT_NPROC_PER_NODE"  # torchrun workers per node (default: GPUs, or 1)


@dataclass(frozen=True)
class Node:
    rank: int
    box: Box        # this machine as a one-machine box: connection, directories, interpreter
    address: str    # where the other nodes reach it (the rendezvous, MASTER_ADDR)
    instance_id: str | int | None = None


def nodes(box: Box) -> list[Node]:
    """The box's nodes, head first; [] for a box of one machine. A record of the wrong shape
    (a hand edit) is refused, never read as fewer nodes."""
    raw = (box.extra or {}).get("nodes")
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(n, dict) for n in raw) or \
            not all(isinstance(n.get("address"), str) and isinstance(n.get("data_dir"), str)
                    for n in raw):
        raise UserError(f"box {box.name}'s record of its nodes is damaged; `rgt down "
                        f"{box.name}` and register the machines again")
    out = []
    for rank, record in enumerate(raw):
        extra = {k: record[k] for k in ("python", "python_version", "python_executable",
                                        "uname", "created_dirs") if k in record}
        member = replace(box, connection=record.get("connection") or {},
                         data_dir=record["data_dir"],
                         durable_dir=record.get("durable_dir") or record["data_dir"],
                         extra=extra)
        out.append(Node(rank, member, record["address"], record.get("instance_id")))
    return out


def pick(members: Sequence[Node], rank: int, *, whose: str, alone: str) -> Node:
    """Node `rank` of `members` (`--node N` of `rgt logs` and `rgt ssh`). Out of range: a
    one-line refusal naming the ranks there are (`whose` has no node N); no members (one
    machine): `alone`, and to drop --node."""
    if not members:
        raise UserError(f"{alone}: drop --node")
    if not 0 <= rank < len(members):
        raise UserError(f"{whose} has no node {rank} (nodes 0-{len(members) - 1})")
    return members[rank]


def spans(box: Box, spec: JobSpec) -> list[Node]:
    """The nodes a run of `spec` uses on `box`: its first resources.nodes ones, head first;
    [] for a run on one machine (a one-machine box, or one node asked of a group)."""
    if spec.resources.nodes < 2:
        return []
    return nodes(box)[:spec.resources.nodes]


def size(box: Box) -> int:
    """How many machines the box is."""
    return max(1, len(nodes(box)))


def node_record(member: Box, address: str, instance_id: str | int | None = None) -> dict:
    record = {"connection": member.connection, "address": address,
              "data_dir": member.data_dir, "durable_dir": member.durable_dir,
              **{k: v for k, v in member.extra.items() if k in NODE_KEYS}}
    if instance_id is not None:
        record["instance_id"] = instance_id
    return record


def in_parallel(items: Sequence[T], work: Callable[[T], Any], *,
                name: Callable[[T], str] = str) -> list[Any]:
    """work(item) for every item at once; the results in order. Every item runs to its end;
    then the first failure is raised, naming its item (`name`)."""
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(work, item) for item in items]
        results, failed = [], None
        for item, future in zip(items, futures, strict=True):
            try:
                results.append(future.result())
            except (UserError, OSError) as err:
                failed = failed or UserError(f"{name(item)}: {err}")
                results.append(None)
    if failed:
        raise failed
    return results


def describe(node: Node) -> str:
    return f"node {node.rank} ({node.address})"


def register(store: Store, name: str, profile: Profile, targets: Sequence[SshTarget], *,
             rate: float | None, data_dir: str | None, durable_dir: str | None,
             addresses: Sequence[str] | None = None,
             instance_ids: Sequence[str | int | None] | None = None) -> Box:
    """Examine every machine (in parallel) and store them as box `name`, the first the head.
    `addresses`: where the nodes reach each other (default: each one's SSH host)."""
    if len({(t.host, t.port) for t in targets}) < len(targets):
        raise UserError("the same machine is given twice: each --ssh must name another one")
    addresses = list(addresses or [t.host for t in targets])
    odd = [a for a in addresses if not ADDRESS.match(a)]
    if odd:
        raise UserError(f"{odd[0]!r} is not a host name or IP address the nodes can dial")
    local = [a for a in addresses if a in ("localhost", "127.0.0.1", "::1")]
    if local:
        raise UserError(f"{local[0]} is how this machine reaches a node, not how the other "
                        "nodes do: give each node by an address they all reach")
    members = in_parallel(
        list(enumerate(targets)),
        lambda it: examine(name, profile, it[1], rate=rate, data_dir=data_dir,
                           durable_dir=durable_dir),
        name=lambda it: f"node {it[0]} ({it[1].host})")
    ids = list(instance_ids or [None] * len(members))
    head = members[0]
    head.extra = {**head.extra,
                  "nodes": [node_record(m, a, i) for m, a, i in zip(members, addresses, ids,
                                                                      strict=True)]}
    store.add_box(head)
    store.record("up", {"profile": profile.name, "nodes": head.extra["nodes"]}, box=name)
    return head


def on_every_node(box: Box, head_transport: Transport,
                  step: Callable[[Node, Transport], Any], *,
                  only: Sequence[Node] | None = None, keep_open: bool = False) -> list[Any]:
    """step(node, its transport) on every node (or `only` those) at once, the head's on the
    open transport; the others' connections are opened and closed here. `keep_open`: left
    open after a step that succeeded, for the next on_every_node to reuse (ssh's master
    outlives its transport) and close: one handshake per node instead of one per step."""
    def one(node: Node) -> Any:
        if node.rank == 0:
            return step(node, head_transport)
        transport = transport_for(node.box)
        try:
            result = step(node, transport)
        except BaseException:
            transport.close()
            raise
        if not keep_open:
            transport.close()
        return result
    return in_parallel(nodes(box) if only is None else list(only), one, name=describe)


def node_layout(node: Node, run_id: str, spec: JobSpec) -> Layout:
    return Layout.of(node.box, run_id, spec)


def contract(box: Box, spec: JobSpec, *, port: int | None = None) -> dict[str, str]:
    """The values every node shares (rgt.remote.node_env), the head first."""
    port = port or int(spec.env.get("RGT_RDZV_PORT") or node_env.RDZV_PORT)
    return node_env.group([n.address for n in spans(box, spec)],
                          gpus_per_node=spec.resources.gpu_count, port=port)


def refuse_unrunnable(spec: JobSpec) -> None:
    """What a group cannot run as the spec means it, refused before anything is pushed."""
    launchers.refuse_lone_launchers(spec.run, spec.resources.nodes)
    if spec.recover is not None:
        # each node's runner would restart its own ranks, each from its own checkpoint home:
        # without a shared one they resume from different steps
        raise UserError(f"recover: on {spec.resources.nodes} machines of a group: a restart "
                        "must be the whole group's, from rank 0's checkpoints — drop `recover` "
                        "and relaunch with `rgt resume BOX` (every node, rank 0's checkpoints "
                        "first), or use a slurm box, whose requeue restarts the whole job")


def worker_command(spec: JobSpec) -> str:
    """What each node runs: a SkyPilot/dstack task's `run` as written (it starts its own
    workers from the variables); an rgt spec's `run` under torchrun across the nodes."""
    if spec.dialect != "rgt":
        return spec.run
    nproc = int(spec.env.get(ENV_NPROC_PER_NODE) or max(1, spec.resources.gpu_count))
    return launchers.torchrun_command(spec.run, nproc,
                                      port=int(spec.env.get("RGT_RDZV_PORT")
                                               or node_env.RDZV_PORT))


def launch(box: Box, head_transport: Transport, spec: JobSpec, run_id: str,
           start: Callable[[Transport, JobSpec, Layout], T]) -> list[T]:
    """One runner per node (`start`: the one-machine start, given that node's spec and
    layout), all at once; returns what each start returned, head first."""
    refuse_unrunnable(spec)  # (checked before the push too, unless resources were skipped)
    shared = contract(box, spec)
    command = worker_command(spec)

    def one(node: Node, transport: Transport) -> T:
        env = {**interface_env(transport, node.address), **spec.env, **shared,
               **node_env.rank(node.rank)}
        return start(transport, spec.model_copy(update={"run": command, "env": env}),
                     node_layout(node, run_id, spec))
    return on_every_node(box, head_transport, one, only=spans(box, spec))


SOCKET_IFNAME = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def interface_env(transport: Transport, address: str) -> dict[str, str]:
    """Bind gloo's and NCCL's sockets to the interface that holds the node's group address.
    Left alone, they bind to whatever the machine's hostname resolves to, and a hostname that
    resolves to nothing (or to 127.0.1.1) has them listen on loopback, where the other nodes
    never reach them. {} when no interface holds it (a NATed public address) or `ip` is
    missing; the spec's own env wins either way."""
    found = transport.run(f"ip -o addr show 2>/dev/null | awk '{{split($4, a, \"/\"); "
                          f"if (a[1] == \"{address}\") print $2}}' | head -n 1",
                          check=False, timeout=30, limit=256)
    name = found.stdout.strip().split("@")[0]
    if not name or not all(c.isalnum() or c in "._-" for c in name):
        return {}
    return dict.fromkeys(SOCKET_IFNAME, name)


def seed_checkpoints(box: Box, head_transport: Transport, spec: JobSpec, run_id: str
                     ) -> str | None:
    """Give every node the head's checkpoint home before a relaunch, where the nodes do not
    share it; returns a line for the run's plan, or None when there is nothing to do."""
    head_home = node_layout(spans(box, spec)[0], run_id, spec).ckpt
    listing = head_transport.run(f"ls -A {shlex.quote(head_home)} 2>/dev/null | head -n 1",
                                 check=False, timeout=60)
    if not listing.stdout.strip():
        return None
    # one file written on the head and looked for on each node says whether they share it
    mark = f".rgt-shared-{run_id}"
    head_transport.run(f"touch {shlex.quote(head_home + '/' + mark)}", check=False, timeout=30)
    try:
        with tempfile.TemporaryDirectory(prefix="rgt-seed-") as tmp:
            copy = Path(tmp) / "ckpt"
            head_transport.get(head_home, copy)
            (copy / mark).unlink(missing_ok=True)

            def seed(node: Node, transport: Transport) -> bool:
                home = node_layout(node, run_id, spec).ckpt
                if node.rank == 0 or transport.run(f"[ -e {shlex.quote(home + '/' + mark)} ]",
                                                   check=False, timeout=30).ok:
                    return False
                transport.run(f"mkdir -p {shlex.quote(home)}", timeout=30)
                transport.put(copy, home)
                return True
            seeded = on_every_node(box, head_transport, seed, only=spans(box, spec))
    finally:
        head_transport.run(f"rm -f {shlex.quote(head_home + '/' + mark)}", check=False,
                           timeout=30)
    count = sum(1 for s in seeded if s)
    if not count:
        return "the nodes share the checkpoint home; every rank resumes from it"
    return (f"the head's checkpoint home was copied to {count} other node(s), which do not "
            "share it: every rank resumes from rank 0's checkpoint")


def run_nodes(run: Any) -> int:
    """How many nodes a recorded run spans (its platform_run says; 1 for any other)."""
    info = (run.spec or {}).get("platform_run") if isinstance(run.spec, dict) else None
    count = info.get("nodes") if isinstance(info, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 1 else 1


def stop_runner(transport: Transport, state_path: str, grace_s: float = 10) -> None:
    """SIGTERM to a node's runner (SIGKILL after grace_s): rgt.onbox.stop."""
    run_json(transport, "stop", state_path, str(grace_s), timeout=grace_s + 60)


NODE_LOST_S = 180.0  # a node silent this long has vanished (RGT_NODE_LOST_S to change it)


def lost_after() -> float:
    """Seconds a node of a running group may not answer before the run is given up."""
    try:
        value = float(os.environ.get("RGT_NODE_LOST_S") or NODE_LOST_S)
    except ValueError:
        raise UserError("RGT_NODE_LOST_S must be a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise UserError("RGT_NODE_LOST_S must be a number of seconds above 0")
    return value


def run_dir(node: Node, run_id: str) -> str:
    """Where run `run_id` lives on this node (`Layout.run_dir` there)."""
    return f"{node.box.data_dir}/rgt/{run_id}"


def state(box: Box, run_id: str, count: int, head_transport: Transport,
          *, stop: Callable[[Transport, str], Any], silent: dict[str, float],
          lost_after: float) -> dict[str, Any]:
    """Every node probed; the run's summary (the head's, its status the group's), with
    `nodes`: each node's status and last log line. A node that ended otherwise than in
    success fails the run, and the nodes still running are stopped (`stop`).

    A node that does not answer is "unreachable" for a while: `silent` (rank -> when it was
    first seen silent, kept by the caller between polls, updated here) says since when, and
    after `lost_after` seconds it counts as vanished: its ranks' peers would otherwise wait on
    it until a collective times out, which can be half an hour. The head not answering is the
    box not answering, raised as for one machine."""
    members = nodes(box)[:count]

    def probe(node: Node, transport: Transport) -> dict[str, Any]:
        return summarize(run_json(transport, "probe", run_dir(node, run_id), "--dirs",
                                  node.box.data_dir, node.box.durable_dir, timeout=60))

    def reach(node: Node) -> dict[str, Any]:
        if node.rank == 0:
            return probe(node, head_transport)
        transport = None
        try:
            transport = transport_for(node.box)
            return probe(node, transport)
        except (UserError, OSError) as err:
            return {**summarize({}), "status": "unreachable", "causes": [str(err)[:300]]}
        finally:
            if transport is not None:
                transport.close()
    summaries = in_parallel(members, reach, name=describe)
    now = time.time()
    for node, said in zip(members, summaries, strict=True):
        key = str(node.rank)
        if said["status"] != "unreachable":
            silent.pop(key, None)
            continue
        since = silent.setdefault(key, now)
        if now - since >= lost_after:
            said.update(status="vanished", causes=[
                f"not answering for {now - since:.0f} s ({said['causes'][0]})"])
    statuses = [s["status"] for s in summaries]
    head = dict(summaries[0])
    head["nodes"] = [{"rank": n.rank, "address": n.address, "status": s["status"],
                      "exit_code": s.get("exit_code"),
                      "last_line": (s.get("log_tail") or [""])[-1][:200],
                      "training": s.get("training") or {}}
                     for n, s in zip(members, summaries, strict=True)]
    # The node whose end has no exit of its own (vanished, killed) first, then by when each
    # ended: a peer's loss makes the survivors' collectives fail a moment later with a plain
    # exit code, and the line a user reads first should name the cause, not its echo.
    ended_badly = sorted(
        ((n, s) for n, s in zip(members, summaries, strict=True)
         if s["status"] in TERMINAL and s["status"] != "succeeded"),
        key=lambda pair: (pair[1]["status"] != "vanished" and pair[1].get("signal") is None,
                          pair[1].get("ended") or 0.0, pair[0].rank))
    if all(st == "succeeded" for st in statuses):
        return head
    if ended_badly:
        live = [n for n, s in zip(members, summaries, strict=True)
                if s["status"] not in TERMINAL and s["status"] != "unreachable"]
        if live:
            stop_nodes(box, live, run_id, head_transport, stop)
            for node in live:  # what they are now, not what the probe found a moment ago
                head["nodes"][node.rank]["status"] = "stopped by rgt"
        all_cancelled = all(s["status"] == "cancelled" for _, s in ended_badly)
        head["status"] = "cancelled" if all_cancelled and not live else "failed"
        if head.get("exit_code") in (None, 0):
            head["exit_code"] = ended_badly[0][1].get("exit_code")
        head["causes"] = [
            f"{describe(node)} {said['status']}: "
            + ("; ".join(said.get("causes") or []) or f"exit {said.get('exit_code')}")
            for node, said in ended_badly[:4]] + \
            ([f"stopped the ranks still running on node(s) "
              f"{', '.join(str(n.rank) for n in live)}"] if live else []) + \
            list(head.get("causes") or [])[:3]
        head["ended"] = head.get("ended") or time.time()
        return head
    if "unreachable" in statuses:
        lost = [describe(n) for n, s in zip(members, summaries, strict=True)
                if s["status"] == "unreachable"]
        head["causes"] = [f"{', '.join(lost)} not answering: " +
                          (summaries[statuses.index("unreachable")]["causes"] or ["?"])[0]] + \
            list(head.get("causes") or [])
        if head["status"] == "succeeded":  # the head ended, a node's end is unknown
            head["status"] = "running"
    elif head["status"] == "succeeded":  # the head is done, others still running
        head["status"] = "running"
    return head


def stop_nodes(box: Box, which: Sequence[Node], run_id: str, head_transport: Transport,
               stop: Callable[[Transport, str], Any]) -> None:
    """Stop the run on the nodes given (`stop(transport, state.json)`), all at once; a node
    that cannot be reached is left (its ranks fail on the dead peer)."""
    def one(node: Node, transport: Transport) -> None:
        stop(transport, run_dir(node, run_id) + "/state.json")
    with contextlib.suppress(UserError, OSError):
        on_every_node(box, head_transport, one, only=which)



def connect_ahead(box: Box, spec: JobSpec) -> Callable[[], None]:
    """Open the connections of the run's other nodes now, in the background, while the launch
    asks the head its questions: a handshake is several round trips, which the check and the
    push then find done (ssh's master outlives its transport). Returns the wait for them; a
    node that fails here is named by the step that needs it."""
    others = spans(box, spec)[1:]
    if not others:
        return lambda: None

    def warm(node: Node) -> None:
        with contextlib.suppress(UserError, OSError):
            transport_for(node.box).run("true", check=False, timeout=60)
    thread = threading.Thread(target=in_parallel, args=(others, warm), daemon=True)
    thread.start()
    return thread.join
