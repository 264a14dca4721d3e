"""Boxes as images ship them: one system user per case, reached over the real sshd, whose PATH
(set by sshd, not by a shell file) holds only the tools that image would have.

    box = stock_box("rgt-nopy3", without=("python3*",), extra={"python": SYSTEM_PYTHON})
    cli("up", "b", "--profile", "generic-ssh", "--ssh", box.ssh,
        "--data-dir", str(box.user.dir("data")), ...)

A user's PATH is one directory of symlinks to every program in /usr/bin and /usr/sbin except
the ones the case leaves out (shell-style patterns), plus the case's additions. sshd sets it
with ``Match User`` + ``SetEnv PATH=...``, so it holds for every command, interactive or not.
Root is never one of these users: root's ~/.bashrc here prepends pyenv to PATH.

Needs root (useradd, sshd); `unavailable()` says why not.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from sshd import SshServer
from sshd import unavailable as sshd_unavailable

TOOL_DIRS = ("/usr/bin", "/usr/sbin")
# The system's own interpreter (what a stock image's python3 is); resolved, not the pyenv shim.
SYSTEM_PYTHON = os.path.realpath("/usr/bin/python3")


def unavailable() -> str | None:
    """Why stock users cannot be made here, or None if they can."""
    if (reason := sshd_unavailable()) is not None:
        return reason
    if shutil.which("useradd") is None:
        return "useradd not installed (passwd package)"
    if not os.path.exists(SYSTEM_PYTHON):
        return "no /usr/bin/python3 to stand in for the box's interpreter"
    return None


@dataclass(frozen=True)
class StockUser:
    name: str
    home: Path
    path_dir: Path

    def sshd_config(self) -> str:
        """The Match block that gives this user its PATH and its authorized key."""
        return (f"Match User {self.name}\n"
                f"    AuthorizedKeysFile {self.home}/.ssh/authorized_keys\n"
                f"    SetEnv PATH={self.path_dir}\n")

    def ssh_command(self, server: SshServer) -> str:
        """What a console would hand out for this user: `ssh -p PORT -i KEY user@host`."""
        return f"ssh -p {server.port} -i {server.client_key} {self.name}@{server.host}"

    def dir(self, name: str) -> Path:
        """A fresh directory in the user's home, owned by the user (a --data-dir, say);
        the `stock_box` fixture removes it afterwards."""
        path = self.home / f"rgt-test-{name}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        os.chown(path, *_ids(self.name))
        return path


def _ids(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def _ensure_user(name: str) -> Path:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True,
                       capture_output=True, text=True)
    # useradd leaves the account locked ("!"), which sshd without PAM refuses even for a key;
    # "*" means no password can log in, while the key still can.
    subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True, text=True)
    return Path(pwd.getpwnam(name).pw_dir)


def stock_user(name: str, *, without: Iterable[str] = (), extra: Mapping[str, str] | None = None,
               client_key: Path) -> StockUser:
    """The system user NAME (made if absent, login shell /bin/sh), whose PATH has every tool
    of this machine except those matching `without`, plus `extra` (name -> target). The PATH
    directory is rebuilt on every call, so each test needs a user name of its own: tests run
    side by side on pytest-xdist workers."""
    home = _ensure_user(name)
    uid, gid = _ids(name)
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    keys = ssh_dir / "authorized_keys"
    keys.write_text(Path(f"{client_key}.pub").read_text())
    for path in (ssh_dir, keys):
        os.chown(path, uid, gid)
    # Owned by root and world-readable: the user can use these tools, not change the set.
    path_dir = home / ".stock-path"
    shutil.rmtree(path_dir, ignore_errors=True)
    path_dir.mkdir()
    path_dir.chmod(0o755)
    patterns = tuple(without)
    for directory in TOOL_DIRS:
        for entry in sorted(os.listdir(directory)):
            link = path_dir / entry
            if any(fnmatch.fnmatchcase(entry, p) for p in patterns) or os.path.lexists(link):
                continue
            target = os.path.join(directory, entry)
            if os.path.isfile(target) and os.access(target, os.X_OK):
                link.symlink_to(target)
    for entry, target in (extra or {}).items():
        (path_dir / entry).symlink_to(target)
    return StockUser(name, home, path_dir)


@dataclass(frozen=True)
class StockBox:
    """One stock user on its own running sshd."""

    user: StockUser
    server: SshServer

    @property
    def ssh(self) -> str:
        return self.user.ssh_command(self.server)


@pytest.fixture
def stock_box(sshd_keys, tmp_path_factory):
    """make(name, without=..., extra=...) -> a StockBox: that user, served by a fresh sshd.
    The sshd is stopped and the directories made with `user.dir()` are removed afterwards."""
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    made: list[StockBox] = []

    def make(name: str, *, without: Iterable[str] = (),
             extra: Mapping[str, str] | None = None) -> StockBox:
        user = stock_user(name, without=without, extra=extra, client_key=sshd_keys.client_key)
        server = SshServer(tmp_path_factory.mktemp("stock-sshd"), keys=sshd_keys,
                           extra_config=user.sshd_config()).start()
        made.append(StockBox(user, server))
        return made[-1]

    yield make
    for box in made:
        box.server.stop()
        for child in box.user.home.glob("rgt-test-*"):
            shutil.rmtree(child, ignore_errors=True)
