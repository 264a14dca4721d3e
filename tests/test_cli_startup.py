"""`rgt --help` and `rgt ls` start without importing what they do not use (issue 13 item 13).

No timing here (bench/startup.py measures it): these hold the mechanism. The top-level command
table in rgt.cli.verbs lists every verb without importing its module; a verb's module loads
only when the verb runs. If someone imports pydantic, httpx or the lifecycle at the top of
rgt.cli again, or adds a verb without listing it, a test here fails.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import typer.main
from cli import rgt

from rgt.cli import app, verbs
from rgt.store import Box, Store

HEAVY = ("pydantic", "httpx", "yaml", "torch", "numpy", "rgt.lifecycle", "rgt.profiles",
         "rgt.platforms", "rgt.spec", "rgt.ckpt", "rgt.remote", "rgt.transport")


def _imported_by(args: list[str], home: Path, before: str = "") -> tuple[set[str], str]:
    """The packages (of HEAVY; rgt's by subpackage) that `rgt ARGS` imported, and its output."""
    modules, out = _modules_of(args, home, before)
    return {m.split(".")[0] if not m.startswith("rgt.") else ".".join(m.split(".")[:2])
            for m in modules}, out


def _modules_of(args: list[str], home: Path, before: str = "") -> tuple[list[str], str]:
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        {before}
        sys.argv = ["rgt", *{args!r}]
        from rgt.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main()
        heavy = {HEAVY!r}
        loaded = sorted({{m for m in sys.modules for h in heavy
                          if m == h or m.startswith(h + ".")}})
        print(json.dumps({{"loaded": loaded, "out": out.getvalue()}}))
    """)
    env = {**os.environ, "RGT_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    return result["loaded"], result["out"]


def test_help_imports_no_verb_module(tmp_path):
    loaded, out = _imported_by(["--help"], tmp_path)
    assert loaded == set(), loaded
    for verb in verbs.VERBS:  # complete all the same: every verb listed, the hidden one not
        assert (f" {verb.name} " in out) != verb.hidden, verb.name


def test_ls_loads_only_the_store_and_money(tmp_path):
    loaded, out = _imported_by(["ls"], tmp_path)
    # typer >= 0.2x coerces parameter values through pydantic itself, so pydantic may be there
    assert loaded - {"pydantic"} == set(), loaded
    assert "No boxes yet" in out
    store = Store(tmp_path / "state.db")
    store.add_box(Box("gpu-1", "autodl", {"host": "h"}, "/d", "/dd", 1.5, "up", time.time()))
    store.db.close()
    loaded, out = _imported_by(["ls"], tmp_path)
    assert "gpu-1" in out and "autodl" in out
    assert loaded <= {"pydantic", "yaml", "rgt.lifecycle", "rgt.profiles"}, loaded
    # the first ls validated autodl's profile and kept its brief: the next builds no schema
    modules, again = _modules_of(["ls"], tmp_path)
    clocks = [line for line in out.splitlines() if "⚠" in line]
    assert clocks and clocks == [line for line in again.splitlines() if "⚠" in line]
    assert not {"yaml", "rgt.profiles.schema", "rgt.profiles.loader"} & set(modules), modules


def test_help_is_the_same_as_with_every_verb_imported(tmp_path):
    """The table's help lines are what the verbs' own docstrings say, in one rendering."""
    eager = "; ".join(f"import {m}" for m in sorted({v.module for v in verbs.VERBS}))
    _, listed = _imported_by(["--help"], tmp_path)
    _, loaded = _imported_by(["--help"], tmp_path, before=eager)
    assert listed == loaded


def test_the_table_matches_the_verbs_modules():
    for module in {v.module for v in verbs.VERBS}:
        __import__(module)
    real = typer.main.get_group(app).commands
    assert sorted(real) == sorted(verbs.BY_NAME), "a verb is missing from rgt.cli.verbs.VERBS"
    for name, command in real.items():
        verb = verbs.BY_NAME[name]
        assert not isinstance(command, verbs._Listed), f"{verb.module} does not define {name}"
        first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
        assert (first, command.hidden) == (verb.help, verb.hidden), \
            f"rgt.cli.verbs.VERBS[{name!r}] must say what {verb.module}'s docstring says"


def test_a_verb_runs_and_helps_from_the_table(tmp_path):
    env = {"RGT_HOME": str(tmp_path)}
    assert "Show a profile" in rgt("profile", "show", "-h", env=env).stdout
    typo = rgt("wacth", "x", env=env)
    assert typo.returncode == 2 and "Did you mean 'watch'?" in typo.stderr
    assert rgt("gotcha", "LAM3", env=env).returncode == 0


def test_ls_idle_default_is_money_s():
    from rgt.cli import ls_cmd
    from rgt.lifecycle import money

    assert ls_cmd.IDLE_AFTER_MIN * 60 == money.IDLE_WARNING_S  # one GEN1 threshold
