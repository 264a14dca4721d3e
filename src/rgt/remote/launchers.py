"""How a job's `run` starts on each node of a multi-node job, the same on every platform.

An rgt spec's `run` (`python train.py …`) is one worker: on N nodes rgt starts it under torch's
elastic launcher once per node, the nodes meeting at a rendezvous on the head node
(`$RGT_HEAD_NODE:$RGT_RDZV_PORT`, the contract of `rgt.remote.node_env`). A line that starts
torchrun itself (a user's own, or a SkyPilot / dstack task's) runs as written, once per node,
with the contract's variables set; it must say where the nodes meet, or each node would train
alone and the run would still read as a success — that is refused before anything starts.
"""

from __future__ import annotations

import re
import shlex

from rgt.errors import UserError

DEFAULT_RDZV_PORT = 29500

# A line that starts torch's elastic launcher itself, and the words that make its nodes meet.
# A command position: a line's start or after ; & | ( then do else, past VAR=x words and the
# wrappers that run their arguments (uv run, srun, exec …); `command -v torchrun` is not one.
_OWN_LAUNCHER = re.compile(
    r"(?:^|[;&|(]|\b(?:then|do|else)\b)\s*(?:[A-Za-z_]\w*=\S*\s+)*"
    r"(?:(?:exec|nohup|time|env|srun|uv\s+run|poetry\s+run|conda\s+run(?:\s+-n\s+\S+)?)\s+)*"
    r"(?:torchrun|(?:\S*/)?python[0-9.]*\s+-m\s+torch\.distributed\.(?:run|launch))(?=\s|$)")
_RENDEZVOUS = re.compile(r"--(?:rdzv[-_]endpoint|master[-_]addr)\b")
_SHELL_SYNTAX = re.compile(r"[;&|<>`(){}\n]|\$\(")
_PYTHON_WORD = re.compile(r"^(?:\S*/)?python[0-9.]*(?:\s+-u)?\s+(?=\S)")


def own_launcher_lines(script: str) -> list[str]:
    """The logical lines (continuations joined, comments skipped) that start torchrun."""
    joined = re.sub(r"\\\r?\n", " ", script)
    return [line.strip() for line in joined.splitlines()
            if not line.lstrip().startswith("#") and _OWN_LAUNCHER.search(line)]


def refuse_lone_launchers(script: str, nodes: int) -> None:
    """A user's own torchrun line on several nodes must say where the nodes meet; without it
    each node starts a training of its own and the run still reads as a success."""
    if nodes < 2:
        return
    for line in own_launcher_lines(script):
        if not _RENDEZVOUS.search(line) or "--standalone" in line:
            raise UserError(
                f"`run` starts its own torchrun on {nodes} nodes without a rendezvous, so each "
                f"node would train alone: {line[:80]!r}; add --nnodes=$RGT_NUM_NODES "
                "--node-rank=$RGT_NODE_RANK --master-addr=$RGT_HEAD_NODE --master-port=29500 "
                "(or the SKYPILOT_/DSTACK_ names), or write `python train.py` and let rgt "
                "start torchrun")


def torchrun_command(command: str, nproc_per_node: int, *, port: int = DEFAULT_RDZV_PORT
                     ) -> str:
    """Turn ``python train.py ARGS`` into a torchrun launch that spans every node of the job.

    Run once per node (the platform starts one per node); the nodes meet on the head
    (``$RGT_HEAD_NODE``, with each node's ``$RGT_NODE_RANK``, set before the job starts).
    The user's text is never split into words and re-quoted (that broke quotes, `$VAR`s and
    `&&`): one plain line is put after the launcher as written; a script (several lines, or
    any shell syntax) runs whole as ``bash -c SCRIPT`` in each worker. A script that starts
    torchrun itself is left alone (`refuse_lone_launchers` has checked its rendezvous).
    """
    if own_launcher_lines(command):
        return command
    # The static rendezvous: every node knows its rank and the head before it starts (the
    # contract), so nothing is negotiated; c10d's would have the head find itself by resolving
    # its own hostname, which fails on a machine whose hostname no DNS or /etc/hosts knows.
    launcher = ["torchrun", "--nnodes=$RGT_NUM_NODES", f"--nproc-per-node={nproc_per_node}",
                "--node-rank=$RGT_NODE_RANK", "--master-addr=$RGT_HEAD_NODE",
                f"--master-port={port}"]
    line = command.strip()
    python = _PYTHON_WORD.match(line)
    if _SHELL_SYNTAX.search(line):
        args = "--no-python bash -c " + shlex.quote(command)
    elif python and (not line[python.end():].startswith("-")
                     or line[python.end():].startswith("-m ")):
        args = line[python.end():]  # torchrun takes the script (or -m module) itself
    else:
        args = "--no-python " + line
    # the contract's variables must expand on each node, so they stay unquoted
    return " ".join(launcher) + " " + args


