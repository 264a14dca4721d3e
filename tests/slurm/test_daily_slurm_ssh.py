"""`rgt ssh` on a Slurm box (a real sshd as the login node of the private cluster): with a run
in the queue, the command runs inside that run's allocation on its node (srun --overlap), and
`--port` forwards to that node; with none, the session stays on the login node and says so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from boxkit import wait_for
from cli import rgt
from sshd import echo_listener

from rgt.store import Store


@pytest.fixture
def login(slurm_cluster, slurm_env, tmp_path):
    """The Slurm box `login`, reached over a real sshd whose sessions find the cluster."""
    from sshd import SshKeys, SshServer, unavailable

    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    keys = SshKeys.generate(tmp_path / "keys")
    server = SshServer(tmp_path / "sshd", keys=keys,
                       extra_config=f"SetEnv SLURM_CONF={slurm_cluster.conf}").start()
    env = {"RGT_HOME": slurm_env["RGT_HOME"]}
    up = rgt("up", "login", "--profile", "slurm", "--durable-dir", str(tmp_path / "durable"),
             "--ssh", f"ssh -p {server.port} -i {keys.client_key} root@127.0.0.1", env=env)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield env
    finally:
        server.stop()


def test_ssh_reaches_the_live_runs_node_through_the_login_node(login, tmp_path):
    env = login
    alone = rgt("ssh", "login", "--", "echo", "${SLURM_JOB_ID:-none}", env=env)
    assert (alone.returncode, alone.stdout) == (0, "none\n"), alone.stderr
    assert "login node" in alone.stderr and "no run of login holds a node" in alone.stderr

    work = tmp_path / "work"
    work.mkdir()
    (work / "job.yaml").write_text(yaml.safe_dump(
        {"name": "held", "workdir": ".", "run": "sleep 120",
         "resources": {"mem": "100M", "cpus": 1}}))
    started = rgt("run", "login", str(work / "job.yaml"), "-d", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    run_id = started.stdout.strip().splitlines()[-1]
    wait_for(lambda: "running" in rgt("watch", "login", run_id, env=env).stdout, timeout=60)
    job_id = Store(Path(env["RGT_HOME"]) / "state.db").run("login", run_id) \
        .spec["platform_run"]["job_id"]

    inside = rgt("ssh", "login", "--", "echo", "$SLURM_JOB_ID", env=env)
    assert (inside.returncode, inside.stdout) == (0, f"{job_id}\n"), inside.stderr
    assert f"then run {run_id}'s node" in inside.stderr

    listener = echo_listener("0.0.0.0")  # the node's name may not be 127.0.0.1
    here = socket.socket()
    here.bind(("127.0.0.1", 0))
    local_port = here.getsockname()[1]
    here.close()
    forward = subprocess.Popen(
        [sys.executable, "-m", "rgt", "ssh", "login", "-N", "--port",
         f"{local_port}:{listener.getsockname()[1]}"],
        env={**os.environ, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        def answered() -> bytes:
            try:
                with socket.create_connection(("127.0.0.1", local_port), timeout=5) as conn:
                    conn.sendall(b"node")
                    return conn.recv(64)
            except OSError:
                return b""
        assert wait_for(answered, timeout=30) == b"echo:node"
    finally:
        forward.terminate()
        forward.communicate(timeout=10)
        listener.close()
        rgt("cancel", "login", run_id, "--yes", "--grace", "1", env=env)
