"""Shell completion (`rgt --install-completion`): box names, run ids, profile names, and a
group's node ranks.

A Tab must answer at once and must never change anything, so the answers are read from the
store's file opened read-only (no backup, no schema check, nothing created when there is no
store yet) and from the profile directories' file names (no YAML, no pydantic). A parameter
gets its completion by its name (`attach`), so every verb that takes a box or a run offers
them without each declaring it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from typing import Any

from rgt import runids


def _store_rows(query: str, args: tuple = ()) -> list[sqlite3.Row]:
    from platformdirs import user_data_dir

    path = os.path.join(os.environ.get("RGT_HOME") or user_data_dir("rgt"), "state.db")
    if not os.path.isfile(path):
        return []
    with contextlib.suppress(sqlite3.Error), \
            contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                               timeout=1)) as db:
        db.row_factory = sqlite3.Row
        return db.execute(query, args).fetchall()
    return []  # a store being written or damaged: no answer rather than an error on Tab


def boxes(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """Registered boxes, those that are up first."""
    rows = _store_rows("SELECT name FROM boxes ORDER BY state != 'up', created")
    return [row["name"] for row in rows if row["name"].startswith(incomplete)]


def runs(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The runs of the box named earlier on the line (newest first), or @last / @-1."""
    box = ctx.params.get("name") or ctx.params.get("box")
    if not box:
        return []
    rows = _store_rows("SELECT runs.id FROM runs JOIN boxes ON boxes.name = runs.box "
                       "WHERE runs.box = ? AND runs.created >= boxes.created "
                       "ORDER BY runs.created", (box,))
    return runids.suggestions([_Id(row["id"]) for row in rows], incomplete)


def nodes(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The ranks of the group named earlier on the line (`--node`), head first."""
    # the option waiting for its value stops the parse, leaving the box's name unparsed
    box = ctx.params.get("name") or ctx.params.get("box") or (ctx.args or [None])[0]
    rows = _store_rows("SELECT json_array_length(extra, '$.nodes') AS n FROM boxes "
                       "WHERE name = ? AND json_valid(extra)", (box,)) if box else []
    count = rows[0]["n"] if rows and isinstance(rows[0]["n"], int) else 0
    return [str(rank) for rank in range(min(count, 1000)) if str(rank).startswith(incomplete)]


def profiles(ctx: Any, param: Any, incomplete: str) -> list[str]:
    from rgt.profiles.files import profile_files

    return [name for name in profile_files() if name.startswith(incomplete)]


class _Id:
    def __init__(self, id: str) -> None:  # noqa: A002  (runids reads `.id`, as of a Run)
        self.id = id


# By the parameter's name; a verb whose parameter means something else is listed in _NOT.
_BY_NAME: dict[str, Callable] = {"name": boxes, "box": boxes, "on": boxes, "run_id": runs,
                                 "run": runs, "after": runs, "profile": profiles,
                                 "node": nodes}
_OWN: dict[tuple[str, str], Callable | None] = {
    ("up", "name"): None, ("rent", "name"): None,  # a new box's name: nothing to offer
    ("profile show", "name"): profiles,
}


def attach(command: Any, path: str) -> None:
    """Give the parameters of COMMAND (the verb PATH, `profile show` for a subcommand), and
    of its subcommands, the completion their names call for, unless they have their own."""
    for param in command.params:
        if getattr(param, "_custom_shell_complete", None) is not None:
            continue
        key = (path, param.name)
        complete = _OWN[key] if key in _OWN else _BY_NAME.get(param.name or "")
        if complete is not None:
            param._custom_shell_complete = complete
    for name, sub in (getattr(command, "commands", None) or {}).items():
        attach(sub, f"{path} {name}")


COMPLETE_VAR = "_RGT_COMPLETE"  # what the installed script sets when the shell asks


def answering_the_shell() -> None:
    """This process is the shell's Tab asking (COMPLETE_VAR is set): register Typer's shell
    classes so that it answers (with Typer's own --install-completion left out, nothing
    registers them)."""
    from typer._completion_classes import completion_init

    completion_init()


def install(shell: str | None = None) -> str:
    """Install Tab completion for the user's shell (bash, zsh, fish, PowerShell) as Typer's
    own `--install-completion` does; where it went."""
    from typer._completion_classes import completion_init
    from typer._completion_shared import _get_shell_name
    from typer._completion_shared import install as typer_install

    from rgt.errors import UserError

    completion_init()
    shell = shell or _get_shell_name() or os.path.basename(os.environ.get("SHELL", ""))
    if shell not in ("bash", "zsh", "fish", "powershell", "pwsh"):
        raise UserError(f"cannot install completion for shell {shell or '(unknown)'!r}: rgt "
                        "completes in bash, zsh, fish and PowerShell")
    shell, path = typer_install(shell=shell, prog_name="rgt", complete_var=COMPLETE_VAR)
    return f"{shell} completion installed in {path}; it works in a new terminal"
