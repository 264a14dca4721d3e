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
import shutil
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


def _ended_run(tmp_path: Path) -> tuple[Path, str]:
    """A local box in its own RGT_HOME with one job run to its end and watched there."""
    home, job = tmp_path / "home", tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text("name: job\nworkdir: .\nrun: echo step=1 loss=0.5\n")
    env = {"RGT_HOME": str(home)}
    assert rgt("up", "b", env=env).returncode == 0
    run_id = rgt("run", "b", str(job / "job.yaml"), env=env).stdout.strip().splitlines()[-1]
    done = rgt("watch", "b", run_id, "--until-done", "--timeout", "60", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return home, run_id


def test_runs_and_watch_of_an_ended_run_ask_no_box(tmp_path):
    """`rgt runs` of ended runs and a second `rgt watch` of an ended run load no platform,
    spec, transport or pydantic: the summary watch saw at the end is shown from the store."""
    home, run_id = _ended_run(tmp_path)
    loaded, out = _imported_by(["runs"], home)
    assert run_id in out and "succeeded" in out
    assert loaded == set(), loaded
    modules, out = _modules_of(["watch", "b", run_id], home)
    assert "succeeded" in out and "step 1 · loss 0.5" in out and "when it had ended" in out
    asked = [m for m in modules if m.split(".")[0] in ("pydantic", "yaml") or m.startswith(
        ("rgt.platforms", "rgt.spec", "rgt.transport", "rgt.remote", "rgt.profiles.schema"))]
    assert not asked, asked
    # the box is really not asked: its run directory gone, watch still answers from the store
    shutil.rmtree(home / "boxes" / "b" / "scratch" / "rgt" / run_id)
    again = rgt("watch", "b", run_id, "--json", env={"RGT_HOME": str(home)})
    document = json.loads(again.stdout)
    assert document["run"]["status"] == "succeeded" and document["run"]["checked_at"] > 0


def test_watch_asks_the_box_again_once_the_store_changed_the_run(tmp_path):
    home, run_id = _ended_run(tmp_path)
    store = Store(home / "state.db")
    store.update_run(run_id, status="failed")  # changed after watch kept its summary
    store.db.close()
    modules, out = _modules_of(["watch", "b", run_id], home)
    assert "rgt.platforms" in modules and "when it had ended" not in out
    assert "succeeded" in out  # the box's word again, not the store's


def test_fast_coercion_gives_what_typer_gives(tmp_path):
    """rgt.cli.coerce's values are Typer's adapter's values; what it is unsure of (and every
    refusal) goes to the adapter, so a bad value reads as Typer words it."""
    from typer._coercion import build_runtime_param, resolve_type_descriptor
    from typer.models import OptionInfo

    from rgt.cli.coerce import _UNSURE, _fast_value

    cases = [(str, "x"), (str, ""), (int, "42"), (int, "-7"), (int, 3), (float, "1.5"),
             (float, "2"), (float, 60), (float, 0.25), (list[str], ("a", "b")),
             (bool, True), (int, "007"), (int, " 4"), (float, "1e3"), (float, "inf")]
    for annotation, value in cases:
        fast = _fast_value(annotation, OptionInfo(), value)
        if fast is _UNSURE:
            continue
        adapter = build_runtime_param(resolve_type_descriptor(annotation, OptionInfo()))
        typed = adapter._coerce_value(value, param=None, ctx=None)
        assert (fast, type(fast)) == (typed, type(typed)), (annotation, value)
    ranged = OptionInfo(min=0, max=10)
    assert _fast_value(int, ranged, "11") is _UNSURE and _fast_value(int, ranged, "10") == 10
    assert _fast_value(int, OptionInfo(), "4.5") is _UNSURE
    bad = rgt("ls", "--idle-after", "soon", env={"RGT_HOME": str(tmp_path)})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "Invalid value for '--idle-after': Input should be a valid number" in bad.stderr
    assert rgt("ls", "--idle-after", "5", env={"RGT_HOME": str(tmp_path)}).returncode == 0


def test_watch_resumable_statuses_are_resume_s():
    from rgt.cli import watch_cmd
    from rgt.lifecycle import resume

    assert watch_cmd.RESUMABLE == resume.RESUMABLE
