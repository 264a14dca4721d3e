"""The typed confirmations of `rgt down` and `rgt cancel`: Ctrl-C at the prompt (pressed on a
real terminal) is one line and exit 130 with nothing changed, never Click's "Aborted!"; no
answer at all (stdin at its end, as in a script) is one line saying how to confirm without a
prompt, exit 2."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
import time

from boxkit import write_job

PROMPT = b"to confirm: "


def on_a_terminal(cli, *args: str) -> subprocess.Popen:
    """`rgt ARGS` with a pty as its controlling terminal: ^C typed there is the terminal's."""
    master, slave = pty.openpty()
    # NOFLSH: the terminal keeps what rgt writes right after the ^C (by default the line
    # discipline flushes its queues once it has sent the signal, racing rgt's last line)
    attrs = termios.tcgetattr(slave)
    attrs[3] |= termios.NOFLSH
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def take_terminal() -> None:  # after setsid (start_new_session): make the pty ours
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {**os.environ, **cli.env, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    proc = subprocess.Popen([sys.executable, "-m", "rgt", *args], env=env, stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True,
                            preexec_fn=take_terminal)
    # the slave stays open here until rgt is gone: with none open, Linux may answer the
    # master's reads with EIO before the last of rgt's output was read
    proc.master, proc.slave = master, slave  # type: ignore[attr-defined]
    return proc


def read_some(proc: subprocess.Popen, wait: float = 0.2) -> bytes:
    ready, _, _ = select.select([proc.master], [], [], wait)
    return os.read(proc.master, 4096) if ready else b""


def read_until(proc: subprocess.Popen, wanted: bytes, timeout: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        assert time.monotonic() < deadline, f"no {wanted!r} on the terminal: {seen!r}"
        assert proc.poll() is None, f"rgt left before {wanted!r}: {seen!r}"
        seen += read_some(proc)
    return seen


def press_ctrl_c(proc: subprocess.Popen) -> tuple[int, str]:
    before = read_until(proc, PROMPT)
    os.write(proc.master, b"\x03")  # what the key sends; the terminal turns it into SIGINT
    rest = b""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        rest += read_some(proc)
    while chunk := read_some(proc, 0.5):  # what it wrote last
        rest += chunk
    rc = proc.wait(timeout=10)
    os.close(proc.master)
    os.close(proc.slave)
    return rc, (before + rest).decode(errors="replace")


def boxes(cli) -> list[dict]:
    return json.loads(cli.ok("ls", "--all", "--json").stdout)["boxes"]


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_ctrl_c_at_downs_prompt_changes_nothing(cli):
    cli.ok("up", "box")
    scratch = cli.home / "boxes" / "box" / "scratch"
    assert scratch.is_dir()
    rc, screen = press_ctrl_c(on_a_terminal(cli, "down", "box"))
    assert rc == 130, screen
    assert "rgt down stopped at the prompt (Ctrl-C); nothing was changed" in screen
    assert "Aborted" not in screen and "Traceback" not in screen
    assert [b["state"] for b in boxes(cli)] == ["up"] and scratch.is_dir()


def test_no_answer_at_downs_prompt_says_how_to_confirm(cli, tmp_path):
    cli.ok("up", "box")
    closed = cli("down", "box", input="")  # stdin at its end, as `</dev/null` gives
    assert closed.returncode == 2
    line = one_line(closed)
    assert "nothing was changed" in line and "`rgt down box --yes`" in line
    assert [b["state"] for b in boxes(cli)] == ["up"]

    # results not pulled: --yes cannot give them up, a name on stdin can
    spec = write_job(tmp_path / "job", run="true")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    refused = cli("down", "box", "--discard-results", input="")
    assert refused.returncode == 2
    assert "`echo box | rgt down box --discard-results`" in one_line(refused)
    assert [b["state"] for b in boxes(cli)] == ["up"]
    wrong = cli("down", "box", "--discard-results", input="other\n")
    assert wrong.returncode == 1 and "did not match" in wrong.stderr
    cli.ok("down", "box", "--discard-results", input="box\n")
    assert [b["state"] for b in boxes(cli)] == ["down"]


def test_cancels_prompt_alike(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="sleep 120")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]

    closed = cli("cancel", "box", run_id, input="")
    assert closed.returncode == 2
    line = one_line(closed)
    assert "the run goes on" in line and f"`rgt cancel box {run_id} --yes`" in line
    rc, screen = press_ctrl_c(on_a_terminal(cli, "cancel", "box", run_id))
    assert rc == 130 and "rgt cancel stopped at the prompt (Ctrl-C); the run goes on" in screen
    assert "Aborted" not in screen
    [run] = json.loads(cli.ok("runs", "--json").stdout)["runs"]
    assert run["status"] == "running", run
    cli.ok("cancel", "box", run_id, "--yes", "--grace", "1")
