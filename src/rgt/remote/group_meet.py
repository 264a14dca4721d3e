"""Where a group's nodes meet: that every node reaches the head on the rendezvous port, checked
by `rgt run` before any rank starts (`refuse_unreachable`) and by `rgt audit` (`audit`, with
the torch version each node runs). The nodes themselves, their connections and the run's
life are rgt.remote.group's."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rgt.errors import UserError
from rgt.remote import launchers, node_env
from rgt.remote.group import Node, describe, nodes, on_every_node, spans
from rgt.spec import JobSpec
from rgt.store import Box
from rgt.transport import Transport

# The check that the nodes reach the head where they will meet (`rgt audit`, and `rgt run`
# before any rank starts): a listener on the head, a dial from each node. The listener
# answers at once (it forks once bound, so the command returns) and is gone when
# `reach_head` returns: it closes its socket when told, and torchrun then binds the port;
# both IPv4 and IPv6 where the head has both, as torch's store listens.
_LISTEN = ("import os,socket,sys,time\n"
           "try:\n"
           "    p=('', int(sys.argv[1]))\n"
           "    s=socket.create_server(p, family=socket.AF_INET6, dualstack_ipv6=True) \\\n"
           "        if socket.has_dualstack_ipv6() else socket.create_server(p)\n"
           "except OSError as e:\n"
           "    print('taken', type(e).__name__, str(e)[:160])\n"
           "    sys.exit(0)\n"
           "if os.fork():\n"
           "    print('up')\n"
           "    sys.exit(0)\n"
           "os.setsid()\n"
           "n=os.open(os.devnull, os.O_RDWR)\n"
           "for f in (0, 1, 2):\n"
           "    os.dup2(n, f)\n"
           "s.settimeout(1)\n"
           "end=time.time()+float(sys.argv[2])\n"
           "while time.time()<end:\n"
           "    try:\n"
           "        c=s.accept()[0]\n"
           "        c.settimeout(2)\n"
           "        if c.recv(4)==b'stop':\n"
           "            s.close()\n"
           "            c.sendall(b'gone')\n"
           "            break\n"
           "        c.close()\n"
           "    except OSError:\n"
           "        pass\n")
_STOP = ("import socket,sys\n"
         "try:\n"
         "    c=socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
         "    c.sendall(b'stop')\n"
         "    c.settimeout(5)\n"
         "    c.recv(4)\n"
         "except OSError:\n"
         "    pass\n")
_DIAL = ("import socket,sys\n"
         "try:\n"
         "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()\n"
         "    print('ok')\n"
         "except OSError as e:\n"
         "    print(type(e).__name__, str(e)[:200])\n")
LISTEN_S = 60  # the longest a listener outlives a laptop that never stops it


@dataclass
class Reach:
    """What the dials to the head's `port` found: `taken` (why the head could not listen
    there, most often another process holds the port), or the nodes that could not reach
    it, each with what its dial said."""

    port: int
    taken: str | None = None
    unreachable: list[tuple[Node, str]] = field(default_factory=list)


def reach_head(box: Box, head_transport: Transport, members: Sequence[Node], port: int, *,
               keep_open: bool = False, ready: Callable[[], Any] = lambda: None) -> Reach:
    """Whether every node of `members` (the head too: its ranks dial its address like the
    others') reaches the head's address on `port`, through a listener started on the head
    for the dials and gone when this returns. `keep_open`: the nodes' connections stay open
    for the next on_every_node (a launch's push); `ready()` waits for them to be open."""
    head = members[0]
    ready()  # (before the listener: its time runs from its start)
    listening = head_transport.run(
        f"{shlex.quote(head_transport.python)} -c {shlex.quote(_LISTEN)} {port} {LISTEN_S}",
        check=False, timeout=30, limit=256)
    # the last line: a shell's start-up files may print before it
    said = (listening.stdout.strip().splitlines() or [""])[-1][:200]
    if said != "up":
        return Reach(port, taken=said.removeprefix("taken ") or
                     (listening.stderr.strip()[:200] or "the listener did not start"))

    def dial(node: Node, transport: Transport) -> str:
        got = transport.run(f"{shlex.quote(transport.python)} -c {shlex.quote(_DIAL)} "
                            f"{shlex.quote(head.address)} {port}", check=False,
                            timeout=30, limit=512)
        return (got.stdout.strip().splitlines() or [""])[-1][:200]
    try:
        answers = on_every_node(box, head_transport, dial, only=members, keep_open=keep_open)
    finally:
        head_transport.run(f"{shlex.quote(head_transport.python)} -c {shlex.quote(_STOP)} "
                           f"{port}", check=False, timeout=30, limit=256)
    return Reach(port, unreachable=[(n, a or "no answer") for n, a in
                                    zip(members, answers, strict=True) if a != "ok"])


_PORT_FLAG = re.compile(r"--(?:master[-_]port|rdzv[-_]endpoint)(?:=|\s+)(\S+)")


def rendezvous_port(spec: JobSpec) -> tuple[int, str] | None:
    """Where the nodes of a run of `spec` meet on the head, where rgt knows it: the port and
    what sets it. The torchrun line rgt writes meets on RGT_RDZV_PORT; a torchrun line of
    the run's own on its --master-port (or --rdzv-endpoint's port) where that is a number or
    the variable rgt sets. None for any other way of meeting (a port the script picks, a
    task that runs a command on every node and meets nowhere): rgt cannot check it."""
    ours = int(spec.env.get("RGT_RDZV_PORT") or node_env.RDZV_PORT)
    lines = launchers.own_launcher_lines(spec.run)
    if not lines:
        return (ours, "RGT_RDZV_PORT in the spec's env") if spec.dialect == "rgt" else None
    flag = _PORT_FLAG.search(lines[0])
    value = flag[1].strip("'\"").rsplit(":", 1)[-1] if flag else ""
    if value in ("$MASTER_PORT", "${MASTER_PORT}", "$RGT_RDZV_PORT", "${RGT_RDZV_PORT}"):
        return ours, "RGT_RDZV_PORT in the spec's env"
    if value.isdecimal() and 0 < int(value) < 65536:
        return int(value), "the port of `run`'s torchrun line"
    return None


def refuse_unreachable(box: Box, head_transport: Transport, spec: JobSpec,
                       ahead: Callable[[], Any] = lambda: None) -> None:
    """Before any rank starts: every node of the run reaches the head where they will meet,
    or a one-line refusal naming the node, the address:port and what to change. Without it
    torchrun waits minutes for its rendezvous on every node, each billing. The nodes'
    connections (`ahead`: being opened) stay open for the push."""
    members = spans(box, spec)
    where = rendezvous_port(spec) if members else None
    if where is None:
        ahead()
        return
    port, setting = where
    head = f"{members[0].address}:{port}"
    found = reach_head(box, head_transport, members, port, keep_open=True, ready=ahead)
    if found.taken:
        raise UserError(f"job {spec.name!r} not started: port {port} on the head "
                        f"({members[0].address}) is taken or cannot be opened ({found.taken}), "
                        f"where its nodes would meet: set {setting} to a free port")
    if found.unreachable:
        node, said = found.unreachable[0]
        others = f" (and {len(found.unreachable) - 1} more)" if len(found.unreachable) > 1 \
            else ""
        raise UserError(f"job {spec.name!r} not started: {describe(node)}{others} cannot "
                        f"reach the head at {head} ({said}), where its nodes would meet: open "
                        f"port {port} between the nodes (a firewall, a security group), give "
                        f"the nodes' private addresses, or set {setting} to a port that is open")


# the installed version, read from its metadata: importing torch takes seconds
_TORCH = ("python3 -c 'import importlib.metadata as m; print(m.version(\"torch\"))' "
          "2>/dev/null || echo none")


def audit(box: Box, head_transport: Transport, port: int = node_env.RDZV_PORT
          ) -> dict[str, Any]:
    """`rgt audit` of a group: every node answers; they run one torch (ranks of different
    versions hang or fail in their first collective); every node reaches the head on the
    rendezvous port, through a listener started on the head for the check."""
    members = nodes(box)
    if not members:
        return {}
    verdicts: list[dict[str, str]] = []

    def facts(node: Node, transport: Transport) -> str:
        python = shlex.quote(transport.python)
        got = transport.run(_TORCH.replace("python3", python), check=False, timeout=60,
                            limit=256)
        return got.stdout.strip().splitlines()[-1][:40] if got.stdout.strip() else "none"
    try:
        # the nodes' connections stay open for reach_head's dials (which close them): one
        # handshake per node, not one per check
        torches = on_every_node(box, head_transport, facts, keep_open=True)
    except UserError as err:
        return {"group": {"nodes": len(members), "verdicts": [
            {"level": "fail", "id": "", "message": f"a node does not answer: {err}"}]}}
    if len(set(torches)) > 1:
        verdicts.append({"level": "fail", "id": "", "message": "the nodes run different torch "
                         "versions (" + ", ".join(f"node {n.rank}: {t}" for n, t in
                                                  zip(members, torches, strict=True))
                         + "): install one version on every node"})
    found = reach_head(box, head_transport, members, port)
    if found.taken:
        verdicts.append({"level": "warn", "id": "", "message": f"port {port} on the head "
                         f"({members[0].address}) is taken or cannot be opened "
                         f"({found.taken}): set RGT_RDZV_PORT in the spec's env to a free one"})
    for node, said in found.unreachable:
        verdicts.append({"level": "fail", "id": "", "message": (
            f"{describe(node)} cannot reach the head {members[0].address}:{port} "
            f"({said}): open that port between the nodes (a "
            "firewall, a security group) or give the nodes' private addresses")})
    if not verdicts:
        verdicts.append({"level": "ok", "id": "", "message": (
            f"{len(members)} nodes answer, run torch {torches[0]}, and reach the head "
            f"{members[0].address}:{port}")})
    return {"group": {"nodes": len(members), "addresses": [n.address for n in members],
                      "verdicts": verdicts}}
