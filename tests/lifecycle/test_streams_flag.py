"""`--streams N` on `rgt run` (its push) and `rgt pull`: the number of parallel connections
the transfer uses over the real sshd, and one line with exit 2 for anything but 1 to 64."""

from __future__ import annotations

import json
import os
import sqlite3

from boxkit import write_job

MIB = 1 << 20


def up_ssh(cli, sshd, tmp_path, name="gpu"):
    target = sshd.target
    cli.ok("up", name, "--profile", "generic-ssh", "--ssh",
           f"ssh -p {target.port} -i {target.identity} root@127.0.0.1",
           "--data-dir", str(tmp_path / "box-data"),
           "--durable-dir", str(tmp_path / "box-durable"))


def push_streams(cli, run_id: str) -> int:
    with sqlite3.connect(cli.home / "state.db") as db:
        [(detail,)] = db.execute("SELECT detail FROM events WHERE kind='push' AND run=?",
                                 (run_id,)).fetchall()
    return json.loads(detail)["streams"]


def test_streams_fixes_the_connections_of_a_push_and_a_pull(cli, sshd_server, tmp_path):
    up_ssh(cli, sshd_server, tmp_path)
    work = tmp_path / "job"
    (work / "data").mkdir(parents=True)
    for i in range(6):  # pieces enough for every stream
        (work / "data" / f"part{i}.bin").write_bytes(os.urandom(MIB))
    spec = write_job(work, run="mkdir -p out && cp data/* out/", outputs=["out"])
    # RGT_STREAMS says 1; the flag is the user's word for this one command
    env = {"RGT_STREAMS": "1"}
    run_id = cli.ok("run", "gpu", str(spec), "-d", "--streams", "3",
                    env=env).stdout.strip().splitlines()[-1]
    assert push_streams(cli, run_id) == 3
    cli.ok("watch", "gpu", run_id, "--until-done", "--timeout", "90")

    pulled = json.loads(cli.ok("pull", "gpu", run_id, "--dest", str(tmp_path / "r"),
                               "--streams", "4", "--json", env=env).stdout)["pull"]
    assert pulled["ok"] and pulled["transfer"]["streams"] == 4, pulled["transfer"]
    again = json.loads(cli.ok("pull", "gpu", run_id, "--dest", str(tmp_path / "r2"),
                              "--json", env=env).stdout)["pull"]
    assert again["ok"] and again["transfer"]["streams"] == 1  # RGT_STREAMS without the flag
    assert (tmp_path / "r2" / "out" / "part5.bin").read_bytes() == \
        (work / "data" / "part5.bin").read_bytes()


def test_a_bad_streams_value_is_one_line_and_exit_2(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="true")
    for value in ("0", "-1", "x", "65"):
        for args in (("run", "box", str(spec), "-d"), ("pull", "box")):
            result = cli(*args, "--streams", value)
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2 and len(lines) == 1, (args, value, result.stderr)
            assert "--streams" in lines[0] and "1 to 64" in lines[0], lines[0]
            assert "Traceback" not in result.stderr
    assert json.loads(cli.ok("runs", "--json").stdout)["runs"] == []  # nothing was started
