"""What SkyPilot's and dstack's task files share once read: where their code comes from, the
local files they bring along, and the variables they take from the user's shell.

- **Workdir.** Both tools resolve a relative workdir from where their command runs (`sky
  launch` / `dstack apply`), not from the YAML's folder; so does rgt for their files. A
  SkyPilot task without `workdir` uploads nothing: rgt pushes an empty directory.
- **Local files** (SkyPilot `file_mounts: {/dst: ./src}`, dstack `files: [src:dst]`) travel
  with the push: each source must lie inside the directory rgt pushes, and the job's setup
  copies it from the pushed code to its destination before anything else runs (SkyPilot
  mounts files before setup). A source outside it (a key under ~/.ssh, a file in /tmp) is
  refused by name: rgt never sends more than the directory the user chose.
- **Variables from the shell** (a SkyPilot `envs` entry with no value, a dstack `env` entry
  with no `=`): required by both tools, read from the user's environment. rgt sends them as
  secrets — read here at `rgt run`, sent on stdin, never written into the run's record.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from rgt.errors import UserError
from rgt.store import rgt_home


def empty_workdir() -> Path:
    """The directory rgt pushes for a task that uploads nothing: empty, and the same for
    every run (a resume pushes it again)."""
    path = rgt_home() / "empty-workdir"
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve(given: str, cwd: Path) -> Path:
    """A path as the task's own tool reads it: ~ expanded, relative to where it runs."""
    return (cwd / Path(os.path.expanduser(given))).resolve()


def pushed_dir(workdir: str | None, sources: list[Path], cwd: Path) -> Path:
    """The directory rgt pushes: the workdir; without one, the nearest folder holding every
    local source (nothing at all without sources)."""
    if workdir is not None:
        path = resolve(workdir, cwd)
        if not path.is_dir():
            raise UserError(f"workdir {path} is not a directory (a relative workdir is read "
                            "from where rgt runs, as the task's own tool reads it)")
        return path
    if not sources:
        return empty_workdir()
    folders = [s if s.is_dir() else s.parent for s in sources]
    common = Path(os.path.commonpath([str(f) for f in folders]))
    if common in (Path(common.anchor), Path.home(), Path.home().parent):
        raise UserError(f"the task's local files {', '.join(map(str, sources[:3]))} share no "
                        f"folder but {common}, which rgt will not push whole; give the task a "
                        "`workdir` that holds them, or move them into one folder")
    return common


def copy_lines(copies: list[tuple[str, Path]], pushed: Path, field: str, *,
               relative_ok: bool = False, relative_to: str | None = None) -> list[str]:
    """Setup lines that copy each (destination, source) from the pushed code to its place;
    `relative_ok`: a ./destination is the job's working dir's (dstack's meaning);
    `relative_to`: the box directory a relative destination lies in (SkyPilot's)."""
    lines = []
    for dst, src in copies:
        if not src.exists():
            raise UserError(f"{field}.{dst}: {src} does not exist here")
        try:
            rel = src.relative_to(pushed)
        except ValueError:
            raise UserError(f"{field}.{dst}: {src} is outside the folder rgt pushes ({pushed})"
                            "; rgt sends nothing else (a key or config of this machine stays "
                            "here): move it into that folder, or create it in `setup`") from None
        if relative_to is not None and not dst.startswith(("/", "~")) \
                and Path(dst) == rel:
            continue  # its place in the workdir copy, where the push already put it
        where = box_path(dst, field, relative_ok=relative_ok, relative_to=relative_to)
        fail = shlex.quote(f"[rgt] {field}: cannot write {dst} on this box")
        if src.is_dir():
            lines.append(f"mkdir -p {where} && cp -a {shlex.quote(str(rel))}/. {where}/ "
                         f"|| {{ echo {fail} >&2; exit 1; }}")
        else:
            lines.append(f"mkdir -p \"$(dirname {where})\" && cp -a {shlex.quote(str(rel))} "
                         f"{where} || {{ echo {fail} >&2; exit 1; }}")
    return lines


def box_path(dst: str, field: str, *, relative_ok: bool = False,
             relative_to: str | None = None) -> str:
    """A destination on the box as a shell word: absolute, or under the box user's home;
    a relative one under `relative_to` (a shell word: SkyPilot reads `data/x` as
    ~/sky_workdir/data/x, rgt's copy of the workdir) where the task's tool has one."""
    if dst.startswith("/") or (relative_ok and dst.startswith("./")):
        return shlex.quote(dst)
    if dst == "~" or dst.startswith("~/"):
        rest = dst[2:]
        return '"$HOME"' + (f"/{shlex.quote(rest)}" if rest else "")
    if relative_to is not None and dst and ".." not in Path(dst).parts:
        rest = dst[2:] if dst.startswith("./") else dst
        return relative_to + (f"/{shlex.quote(rest)}" if rest not in ("", ".") else "")
    raise UserError(f"{field}.{dst}: a relative destination; write it as an absolute path or "
                    "under ~/ (rgt does not guess what it is relative to)")


def from_shell(names: list[str], field: str) -> list[str]:
    """The names of variables the task takes from the user's shell, as rgt secrets; refused
    by name when this shell does not have them."""
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise UserError(f"{field} {missing[0]} has no value in the file and is not set here: "
                        f"`export {missing[0]}=…` first (rgt sends it to the box on stdin, as "
                        "a secret)")
    return names
