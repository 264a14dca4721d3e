"""Boxes as images ship them (issue 19, cases 5–7), over the real sshd with one user per case
whose PATH sshd sets: conda's `python` without `python3`, a stock Debian/Ubuntu box
(`python3`, no `python`, no rsync, no tmux), and an Alpine-like box without bash."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from boxkit import write_job
from stockbox import SYSTEM_PYTHON

from rgt.errors import UserError
from rgt.profiles import load_profile
from rgt.remote.reach import find_python, python_candidates
from rgt.store import Store
from rgt.transport import BashMissing, LocalTransport

JOB = ("for i in 1 2 3; do echo step=$i; sleep 0.2; done\n"
       "python -c 'import sys; print(\"job python\", sys.version_info[0])'\n"
       "mkdir -p out && echo '{\"acc\": 1}' > out/metrics.json")
SYSTEM_VERSION = re.escape(subprocess.run(
    [SYSTEM_PYTHON, "-c", "import platform; print(platform.python_version())"],
    capture_output=True, text=True, check=True).stdout.strip())


def up(cli, box, name):
    return cli("up", name, "--profile", "generic-ssh", "--ssh", box.ssh,
               "--data-dir", str(box.user.dir(f"{name}-data")),
               "--durable-dir", str(box.user.dir(f"{name}-durable")))


def verdict_lines(output: str, level: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(level)]


def test_a_box_with_python_but_no_python3_runs_everything_with_python(cli, stock_box, tmp_path):
    """Case 5 (conda envs, AutoDL's base, AD6): `python3` is absent, `python` is 3.8+."""
    box = stock_box("rgt-py-only", without=("python3*", "tmux*"),
                    extra={"python": SYSTEM_PYTHON})
    registered = up(cli, box, "conda")
    assert registered.returncode == 0, registered.stderr
    assert re.search(rf"python\s+python {SYSTEM_VERSION}", registered.stdout), registered.stdout

    audit = cli("audit", "conda")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "command not found" not in audit.stdout + audit.stderr
    # which interpreter the job gets, and the tools with their versions
    assert re.search(rf"job python: python {SYSTEM_VERSION}", audit.stdout), audit.stdout
    assert re.search(r"tools: python3 missing, python \d", audit.stdout), audit.stdout
    assert re.search(r"note .*tmux.*setsid", audit.stdout), audit.stdout
    assert not verdict_lines(audit.stdout, "fail"), audit.stdout

    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    launched = cli.ok("run", "conda", str(spec))
    assert "setsid" in launched.stdout  # no tmux on the box: say how the run detaches
    run_id = launched.stdout.strip().splitlines()[-1]
    watched = cli("watch", "conda", run_id, "--until-done", "--timeout", "90")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "succeeded" in watched.stdout
    log = cli.ok("logs", "conda", run_id, "--tail", "5").stdout
    assert "step=3" in log and "job python 3" in log


def test_a_stock_debian_box_without_python_rsync_or_tmux_audits_clean(cli, stock_box, tmp_path):
    """Case 6: `python3` and no `python` is the most common box; that is not a failure."""
    box = stock_box("rgt-stock", without=("python", "python2*", "rsync", "tmux*"))
    registered = up(cli, box, "stock")
    assert registered.returncode == 0, registered.stderr
    assert re.search(rf"python\s+python3 {SYSTEM_VERSION}", registered.stdout)

    audit = cli("audit", "stock")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert not verdict_lines(audit.stdout, "fail"), audit.stdout
    assert "did not run" not in audit.stdout
    assert re.search(rf"job python: python3 {SYSTEM_VERSION}", audit.stdout), audit.stdout
    assert re.search(rf"tools: python3 {SYSTEM_VERSION}, python missing, rsync missing, "
                     r"tmux missing, bash \d", audit.stdout), audit.stdout
    assert re.search(r"note .*rsync.*Python", audit.stdout), audit.stdout
    assert re.search(r"note .*tmux.*setsid", audit.stdout), audit.stdout

    # The job's own interpreter is what counts for it: one named by path is measured itself;
    # a bare `python` is the box's python3, which the runner puts first on the job's PATH.
    spec = write_job(tmp_path / "job", run="/opt/conda/bin/python train.py")
    checked = cli("audit", "stock", "--job", str(spec))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert re.search(r"fail U28 the job's python /opt/conda/bin/python did not run .*python3 "
                     "does", checked.stdout), checked.stdout
    bare = cli("audit", "stock", "--job", str(write_job(tmp_path / "bare",
                                                         run="python train.py")))
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert re.search(rf"job python: python3 {SYSTEM_VERSION}", bare.stdout), bare.stdout


def test_a_box_without_bash_is_refused_at_up_with_the_fix(cli, stock_box):
    """Case 7 (Alpine/busybox images): one line naming the fix, exit 2, nothing registered."""
    box = stock_box("rgt-nobash", without=("bash", "rbash"))
    refused = up(cli, box, "alpine")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "bash" in refused.stderr and "apk add bash" in refused.stderr
    assert "alpine" not in cli.ok("ls", "--all").stdout


def test_a_box_registered_before_the_interpreter_was_recorded_still_audits_and_runs(
        cli, stock_box, tmp_path, monkeypatch):
    # a user of its own: stock_user rebuilds the user's PATH directory, so two tests sharing a
    # user on two pytest-xdist workers pulled each other's tools away ("bash: not found")
    box = stock_box("rgt-stock-old", without=("python", "python2*"))
    assert up(cli, box, "old").returncode == 0
    monkeypatch.setenv("RGT_HOME", str(cli.home))
    store = Store()
    store.update_box("old", extra={"uname": store.box("old").extra["uname"]})  # as before

    audit = cli("audit", "old")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert re.search(rf"job python: python3 {SYSTEM_VERSION}", audit.stdout), audit.stdout
    spec = write_job(tmp_path / "job", run="echo old box ok")
    run_id = cli.ok("run", "old", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "old", run_id, "--until-done", "--timeout", "60")
    assert "old box ok" in cli.ok("logs", "old", run_id).stdout


def test_the_profiles_interpreter_comes_first_then_python3_then_python():
    assert python_candidates(load_profile("autodl")) == [
        "/root/miniconda3/bin/python", "python3", "python"]
    assert python_candidates(load_profile("generic-ssh")) == ["python", "python3"]


PYENV = Path("~/.pyenv/versions").expanduser()
OLD_PYTHONS = [str(p) for p in (PYENV / "2.7.18/bin/python2.7", PYENV / "3.7.16/bin/python3.7")]


@pytest.mark.may_skip  # old interpreters come from pyenv, which no package registry here offers
@pytest.mark.skipif(not all(map(os.path.exists, OLD_PYTHONS)), reason="no pyenv 2.7 and 3.7")
def test_an_interpreter_older_than_3_8_is_passed_over_and_named_when_none_is_left():
    transport = LocalTransport()
    found = find_python(transport, [*OLD_PYTHONS, SYSTEM_PYTHON])
    assert found.command == SYSTEM_PYTHON and re.fullmatch(SYSTEM_VERSION, found.version)
    with pytest.raises(UserError) as refused:
        find_python(transport, [*OLD_PYTHONS, "rgt-no-such-python"])
    message = str(refused.value)
    assert "2.7.18: too old" in message and "3.7.16: too old" in message
    assert "rgt-no-such-python (not found)" in message and "\n" not in message


def test_no_bash_on_this_machine_is_the_same_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a local box whose PATH has no bash
    with pytest.raises(BashMissing) as refused:
        LocalTransport().run("true")
    assert "apk add bash" in str(refused.value)


def test_every_stock_box_user_belongs_to_one_test():
    # stock_user rebuilds a user's PATH and the fixture empties its rgt-test-* directories, so
    # two tests naming one user on two xdist workers break each other (it happened: "bash: not
    # found" in the middle of rgt up)
    tests = Path(__file__).parents[1]
    names = [name for path in sorted(tests.rglob("test_*.py"))
             for name in re.findall(r'stock_box\(\s*"([^"]+)"', path.read_text(encoding="utf-8"))]
    assert len(names) >= 7
    assert sorted(names) == sorted(set(names)), names
