"""Daily habits on a local box (real detached runs): `rgt run BOX -- CMD` with this directory
as the workdir, run ids by suffix / prefix / @last / @-1, `logs -f`, `cancel --all`, `pull
--all`, and `down`'s refusal as a table with the command that settles it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from boxkit import Rgt, wait_for


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """An RGT_HOME with the local box `b` and three finished inline runs of the job `proj`."""
    root = tmp_path_factory.mktemp("daily-runs")
    cli = Rgt(root / "rgt-home")
    cli.ok("up", "b")
    project = root / "proj"
    project.mkdir()
    (project / "marker.txt").write_text("pushed-from-cwd\n")
    ids = []
    for n in (1, 2, 3):
        started = _inline(cli, project, "b", f"cat marker.txt; echo run-{n}")
        ids.append(started)
        cli.ok("watch", "b", started, "--until-done", "--timeout", "60")
    return cli, root, ids


def _inline(cli: Rgt, cwd, box: str, command: str, *options: str) -> str:
    """`rgt run BOX -d OPTIONS -- COMMAND` started in CWD; its run id."""
    result = subprocess.run([sys.executable, "-m", "rgt", "run", box, "-d", *options, "--",
                             command], cwd=cwd, env={**_env(), **cli.env}, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert ("no --output" in result.stdout) == (not options), result.stdout
    return result.stdout.strip().splitlines()[-1]


def _env() -> dict:
    import os

    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def test_inline_run_pushes_this_directory_and_is_named_after_it(home):
    cli, _, ids = home
    assert all(run_id.startswith("proj-") for run_id in ids)
    log = cli.ok("logs", "b", ids[0]).stdout
    assert "pushed-from-cwd" in log and "run-1" in log
    # without `--`, a word is a spec file, never a command run on the box
    typo = cli("run", "b", "echo")
    assert typo.returncode == 2 and "job spec echo does not exist" in typo.stderr


def test_run_ids_by_suffix_prefix_and_position(home):
    cli, _, ids = home
    assert "run-2" in cli.ok("logs", "b", ids[1][-4:]).stdout  # the hex at the end
    assert "run-2" in cli.ok("logs", "b", ids[1][:-2]).stdout  # a unique start
    assert "run-3" in cli.ok("logs", "b", "@last").stdout
    assert "run-2" in cli.ok("logs", "b", "@-1").stdout
    assert "run-1" in cli.ok("logs", "b", "@-2").stdout
    for word, said in (("proj-", "is ambiguous"), ("@-3", "has 3 runs"),
                       ("nothing-like-it", "not found")):
        refused = cli("logs", "b", word)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and said in lines[0], refused.stderr
    assert all(run_id in cli("logs", "b", "proj-").stderr for run_id in ids)


def test_logs_follow_streams_while_the_run_goes_on(home, tmp_path):
    cli, root, _ = home
    gate = tmp_path / "go"
    work = root / "proj-follow"
    work.mkdir()
    cli.ok("up", "f")  # its own box: the runs of `b` stay the three the id test counts
    run_id = _inline(cli, work, "f", f"echo tick-1; while [ ! -e {gate} ]; do sleep 0.1; done; "
                                     "echo tick-2; mkdir -p out; echo 42 > out/answer",
                     "--output", "out")
    follow = subprocess.Popen([sys.executable, "-m", "rgt", "logs", "f", run_id, "-f"],
                              env={**_env(), **cli.env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        deadline = time.monotonic() + 60
        while "tick-1" not in seen and time.monotonic() < deadline:
            seen += follow.stdout.readline()
        assert "tick-1" in seen and follow.poll() is None, "streamed while the run waits"
        gate.touch()
        rest, err = follow.communicate(timeout=60)
    finally:
        follow.kill()
    assert follow.returncode == 0 and "tick-2" in rest, err
    cli.ok("pull", "f", run_id, "--dest", str(tmp_path / "pulled"))  # --output: pulled
    assert (tmp_path / "pulled" / "out" / "answer").read_text() == "42\n"
    failed = _inline(cli, work, "f", "echo bad; exit 3")
    ended = cli("logs", "f", failed, "-f")
    assert ended.returncode == 1 and "bad" in ended.stdout and "failed" in ended.stderr
    assert cli("logs", "f", "-f", "--tail", "3").returncode == 2


def test_cancel_all_pull_all_and_the_down_table(home):
    cli, root, _ = home
    cli.ok("up", "c")
    live = []
    for name in ("one", "two"):
        (root / name).mkdir()
        live.append(_inline(cli, root / name, "c", "sleep 120"))
    wait_for(lambda: "running" in cli.ok("watch", "c", live[1]).stdout, timeout=30)

    refused = cli("down", "c", "--yes")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 3 and "2 runs not pulled" in lines[0], refused.stderr
    assert [line.split()[0] for line in lines[1:3]] == live  # one row per run, id first
    assert "`rgt cancel c --all` ends them now" in refused.stderr
    assert "rgt pull c" not in lines[1] + lines[2], "the settling command is said once"

    none_yet = cli("pull", "c", "--all")
    assert none_yet.returncode == 0 and none_yet.stdout.count("is still running") == 2

    cli.ok("cancel", "c", "--all", "--yes", "--grace", "1")
    assert cli.ok("runs", "c").stdout.count("cancelled") == 2
    assert "nothing to cancel" in cli.ok("cancel", "c", "--all", "--yes").stdout

    refused = cli("down", "c", "--yes")
    assert refused.returncode == 3 and "settle it: `rgt pull c --all`" in refused.stderr
    pulled = cli.ok("pull", "c", "--all")
    assert "pulled and verified 2 of 2 runs" in pulled.stdout
    assert all(cli.verified("c", run_id)["ok"] for run_id in live)
    assert "nothing to pull" in cli.ok("pull", "c", "--all").stdout
    cli.ok("down", "c", "--yes")


def test_tab_completes_boxes_runs_and_profiles_from_the_store(home, tmp_path):
    """`rgt --install-completion` writes bash's script; bash running it answers from the
    store (boxes, run ids, @last …) and the profile files."""
    cli, _, ids = home
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rgt").write_text(f'#!/bin/sh\nexec {sys.executable} -m rgt "$@"\n')
    (bin_dir / "rgt").chmod(0o755)
    env = {**_env(), **cli.env, "HOME": str(tmp_path), "SHELL": "/bin/bash",
           "PATH": f"{bin_dir}:/usr/bin:/bin"}
    installed = subprocess.run(["rgt", "--install-completion"], env=env, capture_output=True,
                               text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "rgt.sh"
    assert script.is_file() and f"source '{script}'" in (tmp_path / ".bashrc").read_text()

    def tab(*words: str) -> list[str]:
        line = " ".join(f'"{w}"' for w in words)
        shown = subprocess.run(
            ["bash", "-c", f'source {script}; COMP_WORDS=({line}); '
                           f'COMP_CWORD={len(words) - 1}; _rgt_completion rgt; '
                           'printf "%s\\n" "${COMPREPLY[@]}"'],
            env=env, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        return [w for w in shown.stdout.splitlines() if w]

    assert "b" in tab("rgt", "watch", "")
    assert set(tab("rgt", "logs", "b", "")) == set(ids)
    assert tab("rgt", "logs", "b", ids[0][:-2]) == [ids[0]]
    assert tab("rgt", "cancel", "b", "@") == ["@last", "@-1", "@-2"]
    assert tab("rgt", "profile", "show", "au") == ["autodl"]
    assert tab("rgt", "up", "x", "--profile", "sl") == ["slurm"]
