"""`rgt up`: register a box the user has, or rent one, through its profile's platform."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rgt.errors import UserError
from rgt.lifecycle import interrupt
from rgt.platforms import Request, platform_for
from rgt.profiles import Profile, load_profile
from rgt.remote.register import check_dir_flags
from rgt.spec import Resources
from rgt.store import Box, Store, check_box_name
from rgt.transport import SshTarget, parse_ssh_command


def ssh_target(ssh: str | None, host: str | None, port: int | None, user: str | None,
               identity: str | None, config_file: str | None = None) -> SshTarget | None:
    if ssh and host:
        raise UserError("give either --ssh 'ssh -p PORT user@host' or --host, not both")
    if ssh:
        target = parse_ssh_command(ssh)
        if config_file:
            target = SshTarget(**{**asdict(target), "config_file": Path(config_file)})
        if identity:  # the console's string rarely names a key; the user's flag adds it
            target = SshTarget(**{**asdict(target), "identity": Path(identity)})
        return target
    if host:
        return SshTarget(host=host, port=port, user=user,
                         identity=Path(identity) if identity else None,
                         config_file=Path(config_file) if config_file else None)
    if port or user or identity:
        raise UserError("--port/--user/--identity need --host (or paste --ssh 'ssh ...')")
    return None


def group_targets(ssh: list[str], hosts: Path | None, identity: str | None,
                  config_file: str | None) -> list[SshTarget]:
    """--ssh once or more, or a --hosts file (one connection a line, # comments): the
    machines, head first; [] when neither was given."""
    lines = list(ssh)
    if hosts is not None:
        if ssh:
            raise UserError("give the machines with --ssh or in --hosts, not both")
        try:
            text = hosts.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"cannot read --hosts {hosts}: "
                            f"{getattr(err, 'strerror', None) or err}") from None
        lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
        lines = [ln if ln.startswith("ssh ") or ln == "ssh" else f"ssh {ln}"
                 for ln in lines if ln]
        if not lines:
            raise UserError(f"--hosts {hosts} names no machine (one `ssh …` or user@host a "
                            "line)")
    return [ssh_target(line, None, None, None, identity, config_file) for line in lines]


def up(store: Store, name: str, profile_name: str, target: SshTarget | None, *,
       rate: float | None, data_dir: str | None, durable_dir: str | None,
       resources: Resources | dict[str, Any] | None = None,
       options: dict[str, Any] | None = None,
       on_wait=None, group: list[SshTarget] | None = None) -> tuple[Box, Profile, bool]:
    """Provision box `name` with its profile's platform (register it, or rent it as
    `resources` and the platform's `options` ask). Returns (box, profile, first): first is True
    when no box of this profile was registered before (the CLI shows its facts)."""
    profile = load_profile(profile_name)
    check_box_name(name)  # before anything is rented
    check_dir_flags(data_dir, durable_dir)
    existing = store.find_box(name)
    if existing and existing.state == "up":
        raise UserError(f"a box named {name!r} is already up; pick another name or "
                        f"`rgt down {name}` first")
    first = not any(b.profile == profile.name for b in store.boxes())
    request = Request(name=name, target=target, resources=resources_from(resources), rate=rate,
                      data_dir=data_dir, durable_dir=durable_dir, options=dict(options or {}),
                      group=list(group or []))
    if on_wait is not None:
        request.on_wait = on_wait
    since = time.time()
    with interrupt.explained(lambda: interrupt.up_interrupted(store, name, since)):
        box = platform_for(profile.name).provision(store, request)
    return box, profile, first


def resources_from(given: Resources | dict[str, Any] | None) -> Resources:
    """`rgt up`'s resource flags as the spec's vocabulary; a bad value names its flag."""
    if isinstance(given, Resources):
        return given
    try:
        return Resources.model_validate(given or {})
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "resources"
        shown = (given or {}).get(field, "")
        raise UserError(f"--{field} {shown}: "
                        f"{first['msg'].removeprefix('Value error, ')}") from None


def connect(box: Box):
    """A transport to the box, the way its platform reaches it (SSH, this machine, …)."""
    return platform_for(box.profile).connect(box)
