"""Ctrl-C is one line and exit 130 from the first instant of every verb (issue 29 item 4).

Before, a SIGINT in the first ~1.8 s of a verb met the CLI's imports and printed Python's
KeyboardInterrupt traceback (30 lines of importlib), and one in a verb's own import could end
the process by SIGINT instead of exit 130. The entry (rgt/__main__.py) now says "stopped before
it started" until the verb runs, and rgt.cli.main turns any Ctrl-C no verb explained into one
line.

The instants are counted from when the interpreter is about to reach rgt's first line: a
launcher locates the module (as `python -m rgt` does first), prints "ready" and then enters
rgt exactly as `python -m rgt` (or pip's console script) does; the first instant, 0.05 s, leaves
the few milliseconds runpy takes to read rgt/__main__.py. What comes before that is Python's
own start-up — site and the .pth files of the environment (here one of them imports certifi,
~50 ms) — which no line of rgt can reach. One case also presses
Ctrl-C on a plain `python -m rgt`, past that start-up. Real processes, real SIGINT to the
process group, as a terminal sends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

AS_DASH_M = ("import importlib.util, os, runpy; importlib.util.find_spec('rgt.__main__'); "
             "os.write(1, b'ready\\n'); "
             "runpy.run_module('rgt', run_name='__main__', alter_sys=True)")
# What pip writes for pyproject's `rgt = "rgt.__main__:main"`, with the "ready" line.
AS_SCRIPT = ("import os, re, sys; os.write(1, b'ready\\n'); "
             "from rgt.__main__ import main; sys.exit(main())")


@pytest.fixture(scope="module")
def slow_job(tmp_path_factory) -> Path:
    """A job whose smoke command runs for long: the verb is still going at every instant."""
    work = tmp_path_factory.mktemp("job")
    (work / "job.yaml").write_text("name: slow\nworkdir: .\nrun: sleep 60\nsmoke: sleep 60\n")
    return work / "job.yaml"


def ctrl_c(argv: list[str], after: float, home: Path) -> tuple[bool, int, str]:
    """Start ARGV, wait for its "ready" line (if it prints one) and AFTER seconds more, press
    Ctrl-C. Returns whether it was still running when the key was pressed, its exit status
    and its stderr."""
    env = {**os.environ, "RGT_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    if "-c" in argv:
        assert proc.stdout.read(6) == b"ready\n"
    time.sleep(after)
    running = proc.poll() is None
    if running:
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return running, proc.returncode, err.decode()


def one_line(rc: int, err: str, verb: str) -> None:
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert rc == 130, (rc, err)
    assert err.count("\n") == 1 and err.startswith(f"error: {verb} stopped (Ctrl-C)"), err


@pytest.mark.parametrize("after", [0.05, 0.2, 0.5, 1.0])
def test_smoke_is_one_line_and_130_at_every_instant(slow_job, tmp_path, after):
    running, rc, err = ctrl_c([sys.executable, "-c", AS_DASH_M, "smoke", str(slow_job)],
                              after, tmp_path)
    assert running
    one_line(rc, err, "rgt smoke")


@pytest.mark.parametrize("after", [0.05, 0.1])
def test_ls_is_one_line_and_130_while_it_starts(tmp_path, after):
    running, rc, err = ctrl_c([sys.executable, "-c", AS_DASH_M, "ls"], after, tmp_path)
    if not running or (rc, err) == (0, ""):
        # a fast machine finished `ls` first, or the key came while it exited after answering
        # (rgt then ignores it): then it must simply have succeeded, with nothing said
        assert rc == 0 and not err, (rc, err)
        return
    one_line(rc, err, "rgt ls")


def test_the_console_script_entry_says_it_too(slow_job, tmp_path):
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert '\nrgt = "rgt.__main__:main"\n' in pyproject
    # the key pressed exactly while the entry imports the CLI (no timing: a loaded machine
    # can stretch any sleep past the verb's start)
    during_import = AS_SCRIPT.replace("from rgt.__main__ import main; ", (
        "import signal; from rgt.__main__ import main\n"
        "class PressCtrlC:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'rgt.cli': os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.meta_path.insert(0, PressCtrlC())\n"))
    assert during_import != AS_SCRIPT
    env = {**os.environ, "RGT_HOME": str(tmp_path), "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", during_import, "smoke", str(slow_job)],
                          env=env, capture_output=True, text=True, timeout=60)
    one_line(done.returncode, done.stderr, "rgt smoke")
    assert "before it started; nothing was done" in done.stderr, done.stderr


def test_plain_python_dash_m_past_interpreter_start(slow_job, tmp_path):
    running, rc, err = ctrl_c([sys.executable, "-m", "rgt", "smoke", str(slow_job)], 0.5,
                              tmp_path)
    assert running
    one_line(rc, err, "rgt smoke")
