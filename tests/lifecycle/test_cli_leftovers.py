"""Issue 13 item 11, the leftovers from the newcomer's walk: `logs -n` at its edges, `watch` and
`logs` on a box that is down, `ckpt verify` on files rgt did not write, the demo's checkpoint
count, and no `/path/to/...` placeholder in what `down` shows."""

from __future__ import annotations

import json
import subprocess
import sys

from boxkit import write_job

LINES = 5


def _finished_run(cli, tmp_path) -> str:
    cli.ok("up", "b")
    spec = write_job(tmp_path / "job", run=f"for i in $(seq 1 {LINES}); do echo line $i; done")
    run_id = cli.ok("run", "b", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "b", run_id, "--until-done", "--timeout", "60")
    return run_id


def test_logs_tail_edges_and_a_down_box(cli, tmp_path):
    run_id = _finished_run(cli, tmp_path)
    whole = cli.ok("logs", "b", run_id).stdout
    assert [f"line {i}" in whole for i in range(1, LINES + 1)] == [True] * LINES
    assert cli.ok("logs", "b", "-n", "0").stdout == ""
    assert cli.ok("logs", "b", "-n", "100000").stdout == whole  # more than there is: all of it
    last = cli.ok("logs", "b", "-n", "1").stdout
    assert last.count("\n") == 1 and last == whole.splitlines(keepends=True)[-1]
    negative = cli("logs", "b", "-n", "-1")
    assert negative.returncode == 2 and "Traceback" not in negative.stderr

    cli.ok("pull", "b")
    cli.ok("down", "b", "--yes")
    for args in (("watch", "b"), ("watch", "b", "--until-done"), ("watch", "b", "--json"),
                 ("logs", "b")):
        result = cli(*args)
        assert "Traceback" not in result.stderr and "KeyError" not in result.stderr, args
        assert result.returncode in (0, 2), (args, result.stderr)


def test_ckpt_verify_names_what_rgt_did_not_write(tmp_path):
    import torch

    named_like_rgt = tmp_path / "ckpt-0000000005.pt"  # rgt's name, torch.save's bytes
    torch.save({"w": torch.zeros(2), "step": 5}, named_like_rgt)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a checkpoint\n")

    def verify(path):
        return subprocess.run([sys.executable, "-m", "rgt", "ckpt", "verify", str(path)],
                              capture_output=True, text=True, env={"COLUMNS": "200",
                                                                   "PATH": "/usr/bin:/bin"})

    plain = verify(named_like_rgt)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert plain.stdout.startswith("OK ") and "not an rgt.ckpt save" in plain.stdout
    assert "kind=torch" in plain.stdout and "step=5" in plain.stdout
    other = verify(notes)
    assert other.returncode == 2 and other.stdout == ""
    assert "is not a checkpoint of a format rgt checks" in other.stderr
    assert "DAMAGED" not in other.stdout + other.stderr


def test_demo_counts_checkpoints_not_files(cli):
    result = cli("demo", "--steps", "120", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = cli.verified()
    units = report["checkpoints"]
    loaded = sum("load" in unit["checked"] for unit in units)
    assert 0 < loaded == len(units) < report["counts"]["files"]  # sidecars are no checkpoints
    assert f"{report['counts']['files']} files re-hashed, {loaded} checkpoints loaded" \
        in result.stdout


def test_down_shows_no_placeholder_paths(cli, sshd_server, tmp_path):
    target = sshd_server.target
    cli.ok("up", "gpu", "--profile", "generic-ssh", "--ssh",
           f"ssh -p {target.port} -i {target.identity} root@127.0.0.1",
           "--data-dir", str(tmp_path / "data"), "--durable-dir", str(tmp_path / "durable"))
    down = cli("down", "gpu", input="not-now\n")  # shows the plan, then is refused the name
    assert down.returncode == 1 and "attached-volume" in down.stdout, down.stdout
    assert "/path/to" not in down.stdout and "<" not in down.stdout, down.stdout
    assert json.loads(cli.ok("ls", "--json").stdout)["boxes"][0]["state"] == "up"
