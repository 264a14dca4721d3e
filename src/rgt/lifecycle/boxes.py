"""Registering a box (`rgt up`) and reaching it again later."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from rgt.errors import UserError
from rgt.profiles import Profile, load_profile
from rgt.store import Box, Store, rgt_home
from rgt.transport import (
    HostKeyChanged,
    LocalTransport,
    SshTarget,
    SshTransport,
    Transport,
    TransportError,
    parse_ssh_command,
)


def known_hosts_file() -> Path:
    return rgt_home() / "known_hosts"


def transport_for(box: Box) -> Transport:
    if box.is_local:
        return LocalTransport()
    return SshTransport(target_from_json(box.connection), known_hosts=known_hosts_file())


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


def ssh_target(ssh: str | None, host: str | None, port: int | None, user: str | None,
               identity: str | None, config_file: str | None = None) -> SshTarget | None:
    if ssh and host:
        raise UserError("give either --ssh 'ssh -p PORT user@host' or --host, not both")
    if ssh:
        target = parse_ssh_command(ssh)
        if config_file:
            target = SshTarget(**{**asdict(target), "config_file": Path(config_file)})
        return target
    if host:
        return SshTarget(host=host, port=port, user=user,
                         identity=Path(identity) if identity else None,
                         config_file=Path(config_file) if config_file else None)
    if port or user or identity:
        raise UserError("--port/--user/--identity need --host (or paste --ssh 'ssh ...')")
    return None


def _remote_home(transport: Transport) -> str:
    return transport.run('printf "%s" "$HOME"', timeout=30).stdout.strip()


def resolve_dir(template: str, *, box: str, home: str, flag: str, user: str = "") -> str:
    """Turn a profile path (`$HOME/proj`, `~/x`, `/scratch/$USER/p`, `{RGT_HOME}/boxes/{box}`)
    into a path."""
    path = template.split()[0] if template else ""
    path = path.replace("{RGT_HOME}", str(rgt_home())).replace("{box}", box)
    path = path.replace("$HOME", home).replace("${HOME}", home)
    if user:
        path = path.replace("${USER}", user).replace("$USER", user)
    if path.startswith("~"):
        path = home + path[1:]
    if not path.startswith("/") or "{" in path or "<" in path:
        raise UserError(f"the profile's directory {template!r} needs a value only you know; "
                        f"pass {flag} /absolute/path")
    return path


def check_dir_flags(data_dir: str | None, durable_dir: str | None) -> None:
    """A relative path would land wherever the shell that runs a command happens to start."""
    for flag, value in (("--data-dir", data_dir), ("--durable-dir", durable_dir)):
        if value is not None and not value.startswith("/"):
            raise UserError(f"{flag} {value!r} must be an absolute path on the box "
                            "(e.g. /workspace/data)")


def up(store: Store, name: str, profile_name: str, target: SshTarget | None, *,
       rate: float | None, data_dir: str | None, durable_dir: str | None) -> tuple[Box, Profile,
                                                                               bool]:
    """Register a box the user already rented; check it answers. Returns (box, profile, first)."""
    check_dir_flags(data_dir, durable_dir)
    profile = load_profile(profile_name)
    if profile.facts.kind == "local" and target is not None:
        raise UserError("the local profile runs on this machine; drop --ssh/--host")
    if profile.facts.kind not in ("local", "slurm") and target is None:
        raise UserError(f"profile {profile_name!r} needs a connection: --ssh 'ssh -p PORT "
                        "user@host' (as the console shows it) or --host HOST")
    connection = target_to_json(target) if target else {}
    box = Box(name=name, profile=profile.name, connection=connection, data_dir="",
              durable_dir="", rate=rate, state="up", created=time.time())
    transport = transport_for(box)
    try:
        uname = transport.run("uname -sm", timeout=30).stdout.strip()
        home = _remote_home(transport)
        user = transport.run("id -un", check=False, timeout=30).stdout.strip()
        overrides = profile.overrides
        box.durable_dir = durable_dir or resolve_dir(
            overrides.get("DURABLE_DIR", data_dir or overrides.get("DATA_DIR", "$HOME")),
            box=name, home=home, user=user, flag="--durable-dir")
        if profile.facts.kind == "slurm" and not data_dir:
            # Compute nodes read each run's script and code, so run dirs go on the shared
            # durable tier too; the profile's DATA_DIR ($TMPDIR) is per-job staging space.
            data_dir = box.durable_dir
        box.data_dir = data_dir or resolve_dir(overrides.get("DATA_DIR", "$HOME"), box=name,
                                               home=home, user=user, flag="--data-dir")
        quoted = " ".join(shlex.quote(d) for d in (box.data_dir, box.durable_dir))
        made = transport.run(f"mkdir -p {quoted}", check=False, timeout=30)
        if not made.ok:
            raise UserError(f"cannot create {box.data_dir} / {box.durable_dir} on the box "
                            f"({made.stderr.strip() or 'mkdir failed'}); pass --data-dir and "
                            "--durable-dir with directories you can write")
    finally:
        transport.close()
    first = not any(b.profile == profile.name for b in store.boxes())
    box.extra = {"uname": uname}
    store.add_box(box)
    store.record("up", {"profile": profile.name, "uname": uname, "connection": connection,
                        "data_dir": box.data_dir, "durable_dir": box.durable_dir}, box=name)
    return box, profile, first


def up_when_answering(store: Store, name: str, profile_name: str, target: SshTarget, *,
                      rate: float | None, data_dir: str | None, durable_dir: str | None,
                      on_retry: Callable[[str], None], attempts: int = 10,
                      pause_s: float = 3.0) -> Box:
    """`up` for an instance that was just created: retry while it is not answering SSH yet
    (refused, timing out, our key not installed yet); any other error at once."""
    for attempt in range(1, attempts + 1):
        try:
            box, _, _ = up(store, name, profile_name, target, rate=rate, data_dir=data_dir,
                           durable_dir=durable_dir)
            return box
        except TransportError as err:
            if isinstance(err, HostKeyChanged) or attempt == attempts:
                raise
            on_retry(f"SSH not answering yet ({err}); retrying")
            time.sleep(pause_s)
    raise AssertionError("unreachable")  # pragma: no cover
