"""`rgt up` for a machine that answers a shell: this one, or one reached over SSH.

Every SSH-reached platform ends its `provision` here, whether the user rented the machine
(AutoDL, a bare server) or rgt did (Lambda, vast.ai): the same dirs, the same interpreter
search, the same store record.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import TypeVar

from rgt.errors import UserError
from rgt.profiles import Profile
from rgt.remote.reach import find_python, python_candidates, target_to_json, transport_for
from rgt.store import Box, Store, rgt_home
from rgt.transport import BashMissing, HostKeyChanged, SshTarget, Transport, TransportError

T = TypeVar("T")


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


def register(store: Store, name: str, profile: Profile, target: SshTarget | None, *,
             rate: float | None, data_dir: str | None, durable_dir: str | None) -> Box:
    """Check the machine answers, make its dirs, find its Python, store it as box `name`."""
    box = examine(name, profile, target, rate=rate, data_dir=data_dir, durable_dir=durable_dir)
    store.add_box(box)
    store.record("up", {"profile": profile.name, "uname": box.extra["uname"],
                        "connection": box.connection, "data_dir": box.data_dir,
                        "durable_dir": box.durable_dir, "python": box.extra["python"],
                        "python_version": box.extra["python_version"]}, box=name)
    return box


def examine(name: str, profile: Profile, target: SshTarget | None, *,
            rate: float | None, data_dir: str | None, durable_dir: str | None) -> Box:
    """`register` without the store: the machine answers, its dirs exist, its Python is
    found; the box it would be (a group's nodes are each examined so, in parallel)."""
    check_dir_flags(data_dir, durable_dir)
    if profile.facts.kind == "local" and target is not None:
        raise UserError("the local profile runs on this machine; drop --ssh/--host")
    if profile.facts.kind != "local" and not profile.facts.registers_this_machine \
            and target is None:
        raise UserError(f"profile {profile.name!r} needs a connection: --ssh 'ssh -p PORT "
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
        if profile.facts.jobs_on_other_nodes and not data_dir:
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
    box.extra = {"uname": uname, "python": python.command, "python_version": python.version,
                 "python_executable": python.executable, "created_dirs": created}
    return box


def register_when_answering(store: Store, name: str, profile: Profile, target: SshTarget, *,
                            rate: float | None, data_dir: str | None, durable_dir: str | None,
                            on_retry: Callable[[str], None], attempts: int = 10,
                            pause_s: float = 3.0) -> Box:
    """`register` for an instance that was just created, `when_answering`."""
    return when_answering(lambda: register(store, name, profile, target, rate=rate,
                                           data_dir=data_dir, durable_dir=durable_dir),
                          on_retry, attempts=attempts, pause_s=pause_s)


def when_answering(call: Callable[[], T], on_retry: Callable[[str], None], *,
                   attempts: int = 10, pause_s: float = 3.0) -> T:
    """`call()` (over SSH to a machine just created): retried while it is not answering SSH
    yet (refused, timing out, our key not installed yet); any other error at once."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except TransportError as err:
            # A changed host key or a box without bash will not heal by waiting.
            if isinstance(err, HostKeyChanged | BashMissing) or attempt == attempts:
                raise
            on_retry(f"SSH not answering yet ({err}); retrying")
            time.sleep(pause_s)
    raise AssertionError("unreachable")  # pragma: no cover


def register_rented(store: Store, name: str, profile: Profile, target: SshTarget, *,
                    instance: str, stop_hint: str, **kwargs) -> Box:
    """`register_when_answering` for an instance rgt just rented. If SSH never works, the
    instance still exists and bills: say so, and how to register it by hand or stop it."""
    try:
        return register_when_answering(store, name, profile, target, **kwargs)
    except UserError as err:
        port = f"-p {target.port} " if target.port else ""
        raise UserError(f"{instance} is running (and BILLING) but registering it over SSH as "
                        f"{target.user}@{target.host} failed: {err}. Fix that and register it "
                        f"with `rgt up {name} --profile {profile.name} --ssh 'ssh {port}"
                        f"{target.user}@{target.host}'`, or {stop_hint}") from None
