"""The fetch itself: the platform brings the planned trees (`fetch_planned` through `Fetch`),
and each attempt's log on the box comes as logs/ (`fetch_logs`). Nothing here judges what
arrived: that is `rgt.lifecycle.pull_verify`.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rgt.errors import UserError
from rgt.lifecycle.pull_plan import PullPlan
from rgt.lifecycle.room import Room, gave_up
from rgt.lifecycle.untrusted import real_subdir, write_private
from rgt.remote import group
from rgt.store import Box, Run, Store
from rgt.transport import TransferStats


class Fetch:
    """The platform brings the files, leaving out what it is told to (what arrived is checked
    here, not by it); a pull that gives up leaves no partial behind and says what arrived.
    `stats` sums every transfer of the pull."""

    def __init__(self, platform, transport, box: Box, run: Run, room: Room, progress) -> None:
        self.platform, self.transport, self.box, self.run = platform, transport, box, run
        self.room, self.progress = room, progress
        self.stats = TransferStats(0, 0, 0, 0.0, 0, streams=0)  # nothing yet

    def __call__(self, remote: str, into: Path, exclude: list[str]) -> None:
        try:
            got = self.platform.fetch(self.transport, self.box, self.run, remote, into,
                                      exclude=exclude, progress=self.progress)
        except Exception as exc:  # noqa: BLE001  (Ctrl-C keeps its partials: resumable)
            raise gave_up(self.room, self.run.id, self.box.name, exc) from None
        self.stats = _added(self.stats, got)


def fetch_planned(fetch: Fetch, plan: PullPlan, local: Path, *,
                  home_only: bool = False) -> None:
    """The results without the box's record of its copy; then the checkpoint home as ckpt/,
    the newest checkpoint first where the plan says so, without the checkpoints left on the
    box. `home_only`: the home again, after the plan let an older checkpoint come."""
    if not home_only:
        fetch(plan.source, local, [f"/{plan.box_record}"] if plan.box_record else [])
        if plan.first is not None:
            fetch(plan.home, local / "ckpt", plan.first)
    if plan.checkpoints is not None:
        fetch(plan.home, local / "ckpt", plan.checkpoints.excludes())


def _added(a: TransferStats, b: TransferStats) -> TransferStats:
    return TransferStats(a.bytes_sent + b.bytes_sent, a.bytes_received + b.bytes_received,
                         a.files + b.files, a.seconds + b.seconds, a.attempts + b.attempts,
                         streams=max(a.streams, b.streams))


LOG_TAIL_BYTES = 64 << 20  # a log is evidence to read, not a result: its last 64 MiB


def fetch_logs(store: Store, transport, box: str, run: Run, local: Path) -> list[str]:
    """Each attempt's log on this box, the run's and those of the attempts it continues, as
    logs/<run-id>.log (its tail) in the pull directory. Not verified: the box writes logs, and
    they only inform. Written without following anything the box planted under logs/."""
    fetched = []
    for attempt in store.chain(run):
        if attempt.box != box or attempt.created > run.created:
            continue
        log = shlex.quote(f"{attempt.remote_dir}/log")
        result = transport.run(f"tail -c {LOG_TAIL_BYTES} {log}", check=False, timeout=300,
                               limit=LOG_TAIL_BYTES)  # read no more than that (issue 28)
        if result.ok:  # its bytes as they came (stdout would re-encode invalid UTF-8)
            write_private(real_subdir(local, "logs") / f"{attempt.id}.log", result.data)
            fetched.append(attempt.id)
        fetched += _node_logs(store.box(box), transport, attempt, local)
    return fetched


def _node_logs(box: Box, transport, attempt: Run, local: Path) -> list[str]:
    """A multi-node attempt's other nodes' logs, as logs/<run-id>.node<rank>.log, fetched
    from every node at once; a node that does not answer is skipped (its log only informs).
    Where the nodes share the run's directory (a cluster's filesystem), node i's log is
    `log.node-<i>` beside the head's (group.SHARED_NODE_LOG)."""
    count = group.run_nodes(attempt)
    others = group.nodes(box)[1:count]
    if count > 1 and not group.nodes(box):
        names = []
        for rank in range(1, count):
            path = shlex.quote(f"{attempt.remote_dir}/{group.SHARED_NODE_LOG.format(rank=rank)}")
            got = transport.run(f"tail -c {LOG_TAIL_BYTES} {path}", check=False, timeout=300,
                                limit=LOG_TAIL_BYTES)
            if got.ok:
                write_private(real_subdir(local, "logs") / f"{attempt.id}.node{rank}.log",
                              got.data)
                names.append(f"{attempt.id}.node{rank}")
        return names

    def one(node: group.Node, node_transport) -> str | None:
        log = shlex.quote(f"{group.run_dir(node, attempt.id)}/log")
        try:
            result = node_transport.run(f"tail -c {LOG_TAIL_BYTES} {log}", check=False,
                                        timeout=300, limit=LOG_TAIL_BYTES)
        except UserError:
            return None
        if not result.ok:
            return None
        name = f"{attempt.id}.node{node.rank}"
        write_private(real_subdir(local, "logs") / f"{name}.log", result.data)
        return name
    if not others:
        return []
    try:
        return [n for n in group.on_every_node(box, transport, one, only=others) if n]
    except UserError:
        return []

