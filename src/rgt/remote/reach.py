"""Reaching a registered box again: its transport, its SSH target as stored, its Python."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from rgt.boxfacts import facts
from rgt.errors import UserError
from rgt.profiles import Profile
from rgt.store import Box, rgt_home
from rgt.transport import LocalTransport, SshTarget, SshTransport, Transport


def known_hosts_file() -> Path:
    return rgt_home() / "known_hosts"


def transport_for(box: Box) -> Transport:
    # Boxes registered before `up` recorded an interpreter keep the old default.
    python = facts(box).python or "python3"
    if box.is_local:
        return LocalTransport(python=python)
    return SshTransport(target_from_json(box.connection), known_hosts=known_hosts_file(),
                        python=python)


MIN_PYTHON = (3, 8)
"""The oldest Python rgt's on-box scripts (stdlib only) run on."""

# Answers on Python 2 as well, so that a too-old `python` is named as such, not as broken.
_VERSION_SNIPPET = ("import sys; v = sys.version_info; "
                    "print('%d.%d.%d %s' % (v[0], v[1], v[2], sys.executable))")


@dataclass(frozen=True)
class BoxPython:
    """The interpreter rgt's on-box scripts run with, as found at `up`."""

    command: str  # as typed on the box: `python3`, `python`, /root/miniconda3/bin/python
    version: str
    executable: str


def python_candidates(profile: Profile) -> list[str]:
    """The profile's interpreter first (AutoDL: conda base's), then python3, then python."""
    named = profile.launch.env_contract.python.split()
    return list(dict.fromkeys([*named[:1], "python3", "python"]))


def find_python(transport: Transport, candidates: list[str]) -> BoxPython:
    """The first candidate that runs and is at least 3.8; a UserError naming each one tried."""
    tried = []
    for command in candidates:
        shell = (f'"$HOME"/{shlex.quote(command[2:])}' if command.startswith("~/")
                 else shlex.quote(command))
        result = transport.run(f"{shell} -c {shlex.quote(_VERSION_SNIPPET)}", check=False,
                               timeout=60)
        words = result.stdout.strip().split(" ", 1) if result.ok else []
        numbers = tuple(int(n) for n in words[0].split(".") if n.isdigit()) if words else ()
        if len(numbers) == 3 and numbers >= MIN_PYTHON:
            executable = words[1] if len(words) > 1 else command
            # `~` does not expand once quoted: keep the path the interpreter reports instead.
            return BoxPython(executable if command.startswith("~") else command, words[0],
                             executable)
        if len(numbers) == 3:
            tried.append(f"{command} ({words[0]}: too old)")
        elif result.rc == 127:
            tried.append(f"{command} (not found)")
        else:
            tried.append(f"{command} (exit {result.rc})")
    raise UserError(f"no Python {'.'.join(map(str, MIN_PYTHON))}+ on the box for rgt's on-box "
                    f"scripts: tried {', '.join(tried)}; install one (`apt-get install python3`, "
                    "`apk add python3`) or use an image that has it")


def target_to_json(target: SshTarget) -> dict:
    data = {k: v for k, v in asdict(target).items() if v not in (None, ())}
    return {k: list(v) if isinstance(v, tuple) else str(v) if isinstance(v, Path) else v
            for k, v in data.items()}


def target_from_json(data: dict) -> SshTarget:
    fields = dict(data)
    for key in ("identity", "config_file"):
        if fields.get(key):
            fields[key] = Path(fields[key])
    fields["options"] = tuple(fields.get("options", ()))
    return SshTarget(**fields)
