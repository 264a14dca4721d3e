"""Registering a box (`rgt up`) and reaching it again later."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rgt.errors import UserError
from rgt.profiles import Profile, load_profile
from rgt.store import Box, Store, rgt_home
from rgt.transport import (
    BashMissing,
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
    # Boxes registered before `up` recorded an interpreter keep the old default.
    python = box.extra.get("python") or "python3"
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
        # which of them rgt creates now: `down` deletes those and never a directory the
        # user already had (a local --data-dir holding their own data)
        made = transport.run(f'for d in {quoted}; do [ -e "$d" ] || printf "%s\\n" "$d"; '
                             f"done; mkdir -p {quoted}", check=False, timeout=30)
        created = [d for d in made.stdout.splitlines() if d]
        if not made.ok:
            raise UserError(f"cannot create {box.data_dir} / {box.durable_dir} on the box "
                            f"({made.stderr.strip() or 'mkdir failed'}); pass --data-dir and "
                            "--durable-dir with directories you can write")
        # Found once, here: every later on-box script runs with it (transport_for).
        python = find_python(transport, python_candidates(profile))
    finally:
        transport.close()
    first = not any(b.profile == profile.name for b in store.boxes())
    box.extra = {"uname": uname, "python": python.command, "python_version": python.version,
                 "python_executable": python.executable, "created_dirs": created}
    store.add_box(box)
    store.record("up", {"profile": profile.name, "uname": uname, "connection": connection,
                        "data_dir": box.data_dir, "durable_dir": box.durable_dir,
                        "python": python.command, "python_version": python.version}, box=name)
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
            # A changed host key or a box without bash will not heal by waiting.
            if isinstance(err, HostKeyChanged | BashMissing) or attempt == attempts:
                raise
            on_retry(f"SSH not answering yet ({err}); retrying")
            time.sleep(pause_s)
    raise AssertionError("unreachable")  # pragma: no cover
