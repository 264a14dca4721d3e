"""Laptops as people have them, simulated on this Linux machine for the real `rgt` command line:

- ``mac``: CPython < 3.13 on macOS: no ``os.waitid`` (and none of Linux's other extras), no
  /proc, no setsid(1). A sitecustomize.py on PYTHONPATH deletes the calls; the CLI runs under
  ``unshare --mount`` with an empty tmpfs over /proc (needs root). Everything the CLI starts
  (ssh, a local box's runner) inherits both.
- ``old_rsync``: macOS's stock rsync (2.6.9, or openrsync from macOS 15; protocol 29) first on
  PATH: it refuses the options rsync 2.6.9 does not know, as the real one does.
- ``without``: a PATH that lacks some tools (a fresh Debian container has no rsync).

    laptop = Laptop(home, mac=True, path=...)
    laptop.ok("up", "box")             # like boxkit.Rgt
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from boxkit import Rgt

TOOL_DIRS = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")

SITECUSTOMIZE = '''\
"""This interpreter as CPython 3.11/3.12 on macOS has it: Linux-only calls are absent."""
import os
import select

for _name in ("waitid", "pidfd_open", "sched_getaffinity", "sched_setaffinity",
              "posix_fadvise", "posix_fallocate", "memfd_create", "copy_file_range", "splice",
              "eventfd", "getxattr", "setxattr", "listxattr", "removexattr", "pipe2"):
    if hasattr(os, _name):
        delattr(os, _name)
if hasattr(select, "epoll"):
    del select.epoll
'''

# macOS 14's /usr/bin/rsync and macOS 15's openrsync, as far as rgt could meet them.
OLD_RSYNC = {
    "rsync 2.6.9": "rsync  version 2.6.9  protocol version 29",
    "openrsync": "openrsync: protocol version 29\\nrsync version 2.6.9 compatible",
}
_RSYNC_SHIM = '''#!/bin/sh
# {banner_first}: the options newer rsyncs added are unknown to it.
for arg in "$@"; do
    case "$arg" in
        --version) printf '{banner}\\n'; exit 0 ;;
        --info=*|--debug=*|--append-verify|--preallocate|--usermap=*|--groupmap=*|--chown=*\\
        |--iconv=*|--outbuf=*|--checksum-choice=*|--compress-choice=*|--open-noatime\\
        |--mkpath|--copy-as=*|--stop-after=*|--stop-at=*|--old-args|--secluded-args|-s)
            echo "rsync: $arg: unknown option" >&2
            echo "rsync error: syntax or usage error (code 1) at main.c(1333) [client=2.6.9]" >&2
            exit 1 ;;
    esac
done
exec {real} "$@"
'''


def mac_python_path(directory: Path) -> Path:
    """A directory holding the sitecustomize.py that makes Python look like macOS's."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return directory


def old_rsync_dir(directory: Path, flavor: str) -> Path:
    """A directory whose `rsync` is the stock macOS one of FLAVOR (see OLD_RSYNC)."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "rsync"
    banner = OLD_RSYNC[flavor]
    shim.write_text(_RSYNC_SHIM.format(banner=banner, banner_first=banner.split("\\n")[0],
                                       real=shutil.which("rsync") or "/usr/bin/rsync"))
    shim.chmod(0o755)
    return directory


def path_without(directory: Path, names: Iterable[str]) -> Path:
    """One directory of symlinks to every tool of this machine except NAMES."""
    directory.mkdir(parents=True, exist_ok=True)
    skip = set(names)
    for tools in TOOL_DIRS:
        if not os.path.isdir(tools):
            continue
        for entry in sorted(os.listdir(tools)):
            link = directory / entry
            target = os.path.join(tools, entry)
            if entry in skip or os.path.lexists(link) or not os.access(target, os.X_OK):
                continue
            link.symlink_to(target)
    return directory


class Laptop(Rgt):
    """`rgt` as run on a simulated laptop: PATH replaced or prefixed, and with ``mac=True``
    no os.waitid, no /proc and no setsid(1) (macOS has none; a local box there is the Mac)."""

    def __init__(self, home: Path, *, path: str | None = None, mac: bool = False,
                 work: Path | None = None) -> None:
        super().__init__(home)
        self.prefix: list[str] = []
        if path is None and mac:
            path = str(path_without((work or home.parent) / "mac-bin", ["setsid"]))
        if path is not None:
            self.env["PATH"] = path
        if mac:
            shims = mac_python_path((work or home.parent) / "mac-python")
            self.env["PYTHONPATH"] = os.pathsep.join(
                [str(shims), *filter(None, [os.environ.get("PYTHONPATH")])])
            self.prefix = ["unshare", "--mount", "--fork", "--", "sh", "-c",
                           'mount -t tmpfs -o size=1m rgt-no-proc /proc && exec "$@"', "mac"]

    def command(self, *argv: str, input: str | None = None, env: dict | None = None,
                timeout: float = 180) -> subprocess.CompletedProcess:
        """Any command on this laptop (e.g. ``sys.executable -c ...``)."""
        full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **self.env, **(env or {})}
        return subprocess.run([*self.prefix, *argv], capture_output=True, text=True,
                              env=full_env, timeout=timeout, input=input)

    def __call__(self, *args: str, input: str | None = None, env: dict | None = None,
                 timeout: float = 180) -> subprocess.CompletedProcess:
        return self.command(sys.executable, "-m", "rgt", *args, input=input, env=env,
                            timeout=timeout)
