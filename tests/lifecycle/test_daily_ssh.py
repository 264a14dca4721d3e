"""`rgt ssh BOX [-- CMD]` against a real sshd: a command's output and exit code, forwards that
carry bytes both ways and close with the session, a jump host from the user's ssh config, and
the boxes it refuses by name."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from boxkit import Rgt, up_ssh, wait_for
from sshd import SshServer, echo_listener, free_port


@pytest.fixture(scope="module")
def box(sshd_keys, tmp_path_factory):
    """One sshd and one RGT_HOME with the box `gpu` on it, for every test here."""
    root = tmp_path_factory.mktemp("daily-ssh")
    server = SshServer(root / "sshd", keys=sshd_keys).start()
    cli = Rgt(root / "rgt-home")
    registered = up_ssh(cli, server, root)
    assert registered.returncode == 0, registered.stderr
    try:
        yield cli, server
    finally:
        server.stop()


@pytest.fixture
def echo_server():
    """The port of a TCP server on 127.0.0.1 answering b"echo:" + what it read."""
    listener = echo_listener()
    yield listener.getsockname()[1]
    listener.close()


def _ask(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(payload)
        return conn.recv(1024)


def _answers(port: int) -> bool:
    try:
        return _ask(port, b"ping") == b"echo:ping"
    except OSError:
        return False


def test_a_command_runs_on_the_box_with_its_exit_code(box):
    cli, _ = box
    hi = cli("ssh", "gpu", "--", "echo", "hi")
    assert (hi.returncode, hi.stdout) == (0, "hi\n"), hi.stderr
    # the words go to the box's shell as ssh sends them; a command's own -n is not ssh's
    assert cli("ssh", "gpu", "--", "echo", "-n", "x;", "exit", "7").returncode == 7
    assert cli("ssh", "gpu", "--", "echo", "-n", "x").stdout == "x"


def test_port_forward_carries_bytes_and_closes_with_the_session(box, echo_server):
    cli, _ = box
    here = free_port()
    session = subprocess.Popen(
        [sys.executable, "-m", "rgt", "ssh", "gpu", "-N", "--port", f"{here}:{echo_server}"],
        env={**cli.env, **_env()}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _answers(here), timeout=20)
        assert _ask(here, b"tensorboard") == b"echo:tensorboard"
    finally:
        session.terminate()
        _, err = session.communicate(timeout=10)
    assert f"http://127.0.0.1:{here}" in err
    # its own connection, not the shared master: the forward ended with the session
    assert not _answers(here)


def test_reverse_forward_reaches_this_machine_from_the_box(box, echo_server):
    cli, _ = box
    there = free_port()
    probe = (f"import socket; c = socket.create_connection(('127.0.0.1', {there})); "
             "c.sendall(b'from-box'); print(c.recv(64).decode())")
    result = cli("ssh", "gpu", "-R", f"127.0.0.1:{there}:127.0.0.1:{echo_server}", "--",
                 "python3", "-c", f'"{probe}"')
    assert (result.returncode, result.stdout) == (0, "echo:from-box\n"), result.stderr


def test_through_a_jump_host_from_the_users_config(box, sshd_keys, tmp_path):
    cli, sshd_server = box
    jump = SshServer(tmp_path / "jump", keys=sshd_keys).start()
    try:
        config = tmp_path / "ssh_config"
        config.write_text(f"Host jumphost\n    HostName 127.0.0.1\n    Port {jump.port}\n"
                          f"    User root\n    IdentityFile {sshd_server.client_key}\n"
                          "    IdentitiesOnly yes\n")
        line = (f"ssh -F {config} -J jumphost -i {sshd_server.client_key} "
                f"-p {sshd_server.port} root@127.0.0.1")
        cli.ok("up", "far", "--profile", "generic-ssh", "--ssh", line,
               "--data-dir", str(tmp_path / "d"), "--durable-dir", str(tmp_path / "u"))
        before = jump.log.read_text(errors="replace").count("Accepted publickey")
        hi = cli("ssh", "far", "--", "echo", "via-jump")
        assert (hi.returncode, hi.stdout) == (0, "via-jump\n"), hi.stderr
        assert jump.log.read_text(errors="replace").count("Accepted publickey") > before
    finally:
        jump.stop()


def test_boxes_not_reached_over_ssh_and_bad_forwards_are_refused(box):
    cli, _ = box
    cli.ok("up", "here")
    local = cli("ssh", "here", "--", "true")
    assert local.returncode == 2 and "is this machine" in local.stderr
    for args in (["--port", "99999"], ["--port", "ab"], ["-L", "8888 x"],
                 ["-N", "--", "ls"]):
        bad = cli("ssh", "gpu", *args)
        assert bad.returncode == 2 and bad.stderr.startswith("error:"), (args, bad.stderr)
        assert "Traceback" not in bad.stderr


def _env() -> dict:
    return {"COLUMNS": "200", "NO_COLOR": "1"}
