"""`rgt top` (the live board of boxes and runs) and `rgt plot` (a run's logged metrics), on a
real local box whose job prints loss lines."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

from boxkit import wait_for, write_job

from rgt.lifecycle import untrusted

# step=N loss=1/N for 20 steps, a JSON eval line every 5, and lines a hostile or sloppy
# trainer prints: an infinite loss, a key with an escape sequence, a Rich markup key.
TRAIN = r'''
import json, sys, time
for i in range(1, 21):
    print(f"step={i} loss={1 / i:.6f} lr=0.001", flush=True)
    if i % 5 == 0:
        print(json.dumps({"step": i, "val_acc": i / 20}), flush=True)
print('{"loss": Infinity, "step": 21}')
print(json.dumps({"step": 22, "loss\u001b[31m": 1.0, "[bold red]acc": 0.5}))
print("saving to epoch=3-step=1000.ckpt")
sys.stdout.flush()
time.sleep(float(sys.argv[1]))
'''


def start(cli, tmp_path: Path, linger: float) -> str:
    work = tmp_path / "job"
    work.mkdir(exist_ok=True)
    (work / "train.py").write_text(TRAIN)
    spec = write_job(work, run=f"python3 train.py {linger}")
    return cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]


def logged(cli, run_id: str, text: str) -> None:
    log = cli.home / "boxes" / "box" / "scratch" / "rgt" / run_id / "log"
    wait_for(lambda: log.exists() and text in log.read_text(), timeout=60)


def test_top_once_fits_80_columns_with_money_and_progress(cli, tmp_path):
    cli.ok("up", "box", "--rate", "2.5")
    run_id = start(cli, tmp_path, linger=120)
    logged(cli, run_id, "epoch=3")
    board = cli.ok("top", "--once", env={"COLUMNS": "80"}).stdout
    lines = board.splitlines()
    assert all(len(line) <= 80 for line in lines), board
    assert "box local" in board and "@2.5/h" in board and "$" in board
    run_line = next(i for i, line in enumerate(lines) if run_id[:20] in line)
    assert "running" in lines[run_line]
    assert "loss" in " ".join(lines[run_line:run_line + 2])  # too wide: on the next line
    assert "1 box up" in lines[-1] and "$2.50/h" in lines[-1]

    wide = cli.ok("top", "--once", env={"COLUMNS": "160"}).stdout
    assert any(run_id in line and "loss" in line for line in wide.splitlines()), wide

    doc = json.loads(cli.ok("top", "--once", "--json").stdout)
    assert doc["schema"] == 1 and doc["verb"] == "top" and doc["burn_usd_per_hour"] == 2.5
    [box] = doc["boxes"]
    [run] = box["runs"]
    assert box["rate_usd_per_hour"] == 2.5 and box["spent_usd"] > 0
    assert run["id"] == run_id and run["status"] == "running"
    assert "loss" in run["progress"] and not run["pulled"]
    bad = cli("top", "--json")
    assert bad.returncode == 2 and "--once" in bad.stderr and "Traceback" not in bad.stderr
    piped = cli("top", "--interval", "0.5", timeout=60)  # not a terminal: one frame, no loop
    assert piped.returncode == 0 and piped.stdout.count("1 box up") == 1, piped.stdout
    cli.ok("cancel", "box", run_id, "--yes", "--grace", "1")


def test_top_redraws_in_place_and_ctrl_c_quits_cleanly(cli, tmp_path):
    cli.ok("up", "box", "--rate", "1")
    run_id = start(cli, tmp_path, linger=120)
    logged(cli, run_id, "epoch=3")
    master, slave = pty.openpty()
    env = {**os.environ, **cli.env, "COLUMNS": "80", "LINES": "30", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "rgt", "top", "--interval", "0.5"],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    # three frames: the run's row shows up each time the board is redrawn
    while seen.count(run_id[:20].encode()) < 3:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        seen += os.read(master, 65536)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    while True:
        try:
            more = os.read(master, 65536)
        except OSError:
            break
        if not more:
            break
        seen += more
    os.close(master)
    text = seen.decode(errors="replace")
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "\x1b[?25l" in text and text.rstrip().endswith("\x1b[?25h"), \
        "the cursor is hidden while drawing and shown again on Ctrl-C"
    assert "\x1b[2J" not in text, "a redraw moves the cursor up; it never clears the screen"
    assert "loss" in text and "Ctrl-C quits" in text, text
    cli.ok("cancel", "box", run_id, "--yes", "--grace", "1")


def test_plot_reads_the_box_then_the_pull_and_writes_a_png(cli, tmp_path):
    cli.ok("up", "box")
    run_id = start(cli, tmp_path, linger=0)
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")

    doc = json.loads(cli.ok("plot", "box", "--json").stdout)
    assert doc["verb"] == "plot" and doc["run"] == run_id and doc["source"] == "box"
    assert doc["x"] == "step"
    assert doc["series"]["loss"] == [[i, round(1 / i, 6)] for i in range(1, 21)]
    assert doc["series"]["val_acc"] == [[i, i / 20] for i in (5, 10, 15, 20)]
    assert set(doc["series"]) == {"loss", "val_acc", "lr", "[bold red]acc"}
    assert any("loss\\x1b[31m" in note for note in doc["notes"]), "an unreadable key is named"

    shown = cli.ok("plot", "box", run_id, env={"COLUMNS": "80"}).stdout
    assert "loss  last 0.05 · min 0.05 at step 20 · 20 points" in shown
    assert any(0x2800 < ord(c) <= 0x28FF for c in shown), "braille dots draw the line"
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    assert "read from the box" in shown
    assert "also logged: [bold red]acc" in shown, "a name from the box is text, never markup"
    asked = cli.ok("plot", "box", "-m", "val_acc", "--log-y").stdout
    assert "val_acc  last 0.05" not in asked and "val_acc  last 1" in asked
    missing = cli("plot", "box", "-m", "bleu")
    assert missing.returncode == 2 and "logged no metric 'bleu'" in missing.stderr

    png = tmp_path / "loss.png"
    cli.ok("plot", "box", "--png", str(png))
    from matplotlib import image  # the `plot` extra, in the test extra too

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = image.imread(png).shape[:2]
    assert width == 900 and height > 300

    dest = tmp_path / "results"
    cli.ok("pull", "box", run_id, "--dest", str(dest))
    cli.ok("down", "box", "--yes")
    after = json.loads(cli.ok("plot", "box", "--json").stdout)
    assert after["source"] == str(dest / "logs" / f"{run_id}.log")
    assert after["series"] == doc["series"], "a pulled log plots as its box did"

    fake = tmp_path / "no-matplotlib"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('not installed')\n")
    path = os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))
    without = cli("plot", "box", "--png", str(tmp_path / "x.png"), env={"PYTHONPATH": path})
    assert without.returncode == 2 and "Traceback" not in without.stderr
    assert "pip install 'rgt[plot]'" in without.stderr and not (tmp_path / "x.png").exists()
    assert without.stdout == "", "refused before the terminal chart is drawn"


def test_plot_says_what_it_needs(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "quiet", run="echo no metrics here")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    quiet = cli("plot", "box")
    assert quiet.returncode == 1 and "holds no metric lines" in quiet.stderr
    cli.ok("down", "box", "--discard-results", input="box\n")
    gone = cli("plot", "box", run_id)
    assert gone.returncode == 2 and f"rgt pull box {run_id}" in gone.stderr


def test_metric_log_is_bounded_and_keeps_the_last_line(monkeypatch):
    monkeypatch.setattr(untrusted, "MAX_RECORDS", 100)
    log = untrusted.read_metric_log("\n".join(
        f"step={i} loss={1000 - i}" for i in range(1, 1001)).encode())
    assert log.lines == 1000 and len(log.records) <= 101
    steps = [step for step, _, _ in log.records]
    assert steps[0] == 1 and steps[-1] == 1000, "thinned evenly, the last line always kept"
    assert len({b - a for a, b in zip(steps[:-2], steps[1:-1], strict=True)}) == 1


def test_metric_log_keeps_only_readable_names_and_finite_numbers():
    lines = ["x" * (untrusted.MAX_LINE_BYTES + 1) + " loss=1",
             json.dumps({"loss": 1e308 * 10, "acc": float("nan"), "val_loss": 2}),
             "{'loss': (1, 2), 'eval_loss': '0.25'}",
             json.dumps({"k" * 65 + "_loss": 1, "loss\n": 3, "loss": 0.5}),
             json.dumps({f"loss_{k}": k for k in range(80)})]
    log = untrusted.read_metric_log("\n".join(lines).encode())
    values = [r[2] for r in log.records]
    assert values[:3] == [{"val_loss": 2.0}, {"eval_loss": 0.25}, {"loss": 0.5}]
    assert set().union(*values) <= {"val_loss", "eval_loss", "loss"} | {
        f"loss_{k}" for k in range(80)}
    assert len(set().union(*values)) == untrusted.MAX_SERIES
    assert {"loss", "'loss\\n'"} <= log.skipped_keys
