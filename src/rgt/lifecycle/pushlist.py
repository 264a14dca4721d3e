"""What a push leaves out: results never travel back to the box they came from.

A pull writes into `./rgt-results/<box>/<run>` by default, and the current directory is often
the job's workdir; a push that sent that tree back would copy every checkpoint to the box again
(and nest it one level deeper each round). So every push leaves out, on top of the spec's
`exclude`:

- `rgt-results/` at any depth (the default pull destination's top directory);
- every directory rgt ever pulled into (`--dest`) that lies strictly inside the workdir (a
  pull refuses the workdir itself and any directory holding it: `run_workdirs`), and RGT_HOME
  itself when it does (its evidence and state are the laptop's, never the job's);
- the patterns in the workdir's `.rgtignore`: one per line, `#` comments, rsync's `--exclude`
  meaning (`data/` a directory at any depth, `/big.bin` only at the top, `**/*.ckpt`).

`rgt smoke` runs in a scratch copy made with the same list, so it sees what the box will see.
"""

from __future__ import annotations

import os
from pathlib import Path

from rgt.errors import UserError
from rgt.spec import JobSpec
from rgt.store import Store, rgt_home

RESULTS_DIR = "rgt-results"  # `rgt pull`'s default destination: ./rgt-results/<box>/<run>
IGNORE_FILE = ".rgtignore"


def push_excludes(spec: JobSpec, store: Store | None = None) -> list[str]:
    """Every pattern a push of SPEC's workdir leaves out (rsync `--exclude` meaning)."""
    return list(dict.fromkeys(user_excludes(spec) + results_excludes(spec, store)))


def user_excludes(spec: JobSpec) -> list[str]:
    """What the user left out: the spec's `exclude` and the workdir's `.rgtignore`."""
    return list(spec.exclude) + read_ignore_file(Path(spec.workdir))


def results_excludes(spec: JobSpec, store: Store | None = None) -> list[str]:
    """What rgt itself wrote into the workdir: pulled results, and RGT_HOME if it is there."""
    workdir = Path(os.path.realpath(spec.workdir))
    patterns = [f"{RESULTS_DIR}/"]
    for path in [rgt_home()] + (pull_destinations(store) if store is not None else []):
        rel = _below(workdir, path)
        if rel:
            patterns.append(f"/{_escaped(rel)}/")
    return patterns


def read_ignore_file(workdir: Path) -> list[str]:
    """The patterns of WORKDIR/.rgtignore (none when there is no such file)."""
    path = workdir / IGNORE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read {path}: {err}") from None
    patterns = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            raise UserError(f"{path}:{number}: '!' (re-include) is not supported; list only "
                            "what to leave out, e.g. `data/` or `*.ckpt`")
        patterns.append(line)
    return patterns


def pull_destinations(store: Store) -> list[Path]:
    """Every directory a pull on this machine wrote into, as recorded in its `pull` event."""
    rows = store.db.execute("SELECT DISTINCT json_extract(detail, '$.dest') FROM events "
                            "WHERE kind='pull'").fetchall()
    return [Path(dest) for (dest,) in rows if isinstance(dest, str) and dest]


def run_workdirs(store: Store) -> list[Path]:
    """Every workdir a run on this machine pushed, resolved: what a pull must not write into
    (`rgt pull` refuses a destination that is one, or holds one)."""
    rows = store.db.execute("SELECT DISTINCT json_extract(spec, '$.workdir') FROM runs"
                            ).fetchall()
    return [Path(os.path.realpath(workdir)) for (workdir,) in rows
            if isinstance(workdir, str) and workdir]


def _below(root: Path, path: Path) -> str | None:
    """PATH relative to ROOT when it lies strictly inside it, else None."""
    try:
        rel = Path(os.path.realpath(path)).relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts else None


def _escaped(rel: str) -> str:
    """A literal path as an rsync pattern: its wildcard characters escaped."""
    return "".join("\\" + c if c in "*?[\\" else c for c in rel)
