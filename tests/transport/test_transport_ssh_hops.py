"""SSH as users have it: a jump host (a second real sshd), a passphrase-protected key with no
agent, and ``ssh://`` destinations. Each error must name the real cause and the hop."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sshd import SshServer

from rgt.transport import (
    AuthenticationFailed,
    HostKeyChanged,
    SshTarget,
    SshTransport,
    Unreachable,
    parse_ssh_command,
)


@pytest.fixture
def jump_server(sshd_keys, tmp_path_factory):
    """A second sshd: the bastion in front of the box (`sshd_server`)."""
    server = SshServer(tmp_path_factory.mktemp("jump"), keys=sshd_keys).start()
    try:
        yield server
    finally:
        server.stop()


def _config(path: Path, jump: SshServer, identity: Path, extra: str = "") -> Path:
    """An ssh config where `jumphost` is the bastion (as users write it in ~/.ssh/config)."""
    path.write_text(
        f"Host jumphost\n    HostName 127.0.0.1\n    Port {jump.port}\n    User root\n"
        f"    IdentityFile {identity}\n    IdentitiesOnly yes\n{extra}"
    )
    return path


def _recorded(known_hosts: Path, name: str) -> bool:
    proc = subprocess.run(["ssh-keygen", "-F", name, "-f", str(known_hosts)],
                          capture_output=True, text=True)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _via_jump(box: SshServer, jump: SshServer, tmp_path: Path, extra: str = "") -> SshTarget:
    config = _config(tmp_path / "ssh_config", jump, box.client_key, extra)
    return parse_ssh_command(
        f"ssh -F {config} -J jumphost -i {box.client_key} -p {box.port} root@127.0.0.1"
    )


def _accepted_logins(server: SshServer) -> int:
    return server.log.read_text(errors="replace").count("Accepted publickey")


def test_unknown_jump_host_is_recorded_in_rgts_known_hosts(sshd_server, jump_server, tmp_path):
    known = tmp_path / "rgt" / "known_hosts"
    with SshTransport(_via_jump(sshd_server, jump_server, tmp_path), known_hosts=known) as t:
        assert t.run("echo through").stdout == "through\n"
    assert _accepted_logins(jump_server) >= 1  # the connection really went through the bastion
    # Both hops are held by rgt's own file, first contact recorded as for a direct box.
    assert _recorded(known, f"[127.0.0.1]:{jump_server.port}")
    assert _recorded(known, f"[127.0.0.1]:{sshd_server.port}")


def test_changed_jump_host_key_is_refused_and_names_the_jump_host(
    sshd_server, jump_server, tmp_path
):
    known = tmp_path / "rgt" / "known_hosts"
    t = SshTransport(_via_jump(sshd_server, jump_server, tmp_path), known_hosts=known)
    t.run("true")
    t.close()
    jump_server.regenerate_host_key()
    with pytest.raises(HostKeyChanged) as info:
        t.run("true")
    message = str(info.value)
    assert "\n" not in message
    assert f"jump host jumphost (127.0.0.1:{jump_server.port})" in message
    assert "cannot reach" not in message and "the box" not in message.split(";")[0]
    # The fix it names is enough to connect again (the new key is then recorded).
    fix = message[message.index("ssh-keygen -R"):]
    subprocess.run(shlex.split(fix), check=True, capture_output=True)
    assert t.run("echo back").stdout == "back\n"
    t.close()


def test_jump_host_known_to_the_user_is_trusted_and_held_to_it(
    sshd_server, jump_server, tmp_path
):
    """Keys the user already trusts for the bastion (their own known_hosts, as their ssh config
    names it) still work, and a key that differs from theirs is refused, not replaced."""
    users = tmp_path / "users_known_hosts"
    extra = f"    UserKnownHostsFile {users}\n"
    known = tmp_path / "rgt" / "known_hosts"
    public = Path(f"{jump_server.host_key}.pub").read_text().split()[:2]
    users.write_text(f"[127.0.0.1]:{jump_server.port} {' '.join(public)}\n")
    target = _via_jump(sshd_server, jump_server, tmp_path, extra)
    with SshTransport(target, known_hosts=known) as t:
        assert t.run("echo ok").stdout == "ok\n"
    assert not _recorded(known, f"[127.0.0.1]:{jump_server.port}")  # theirs was enough

    jump_server.regenerate_host_key()
    with (SshTransport(target, known_hosts=known) as t,
          pytest.raises(HostKeyChanged, match=r"jump host .*" + str(users))):
        t.run("true")
    assert users.read_text().split()[1:] == public  # never silently replaced


def test_unreachable_jump_host_is_named_as_the_jump_host(sshd_server, jump_server, tmp_path):
    target = _via_jump(sshd_server, jump_server, tmp_path)
    jump_server.stop()
    with (SshTransport(target, known_hosts=tmp_path / "kh") as t,
          pytest.raises(Unreachable) as info):
        t.run("true")
    assert f"jump host jumphost (127.0.0.1:{jump_server.port})" in str(info.value)


def test_box_down_behind_a_working_jump_host_says_the_box(sshd_server, jump_server, tmp_path):
    target = _via_jump(sshd_server, jump_server, tmp_path)
    sshd_server.stop()
    with (SshTransport(target, known_hosts=tmp_path / "kh") as t,
          pytest.raises(Unreachable) as info):
        t.run("true")
    message = str(info.value)
    assert "jump host jumphost" in message and f"127.0.0.1:{sshd_server.port}" in message
    assert "check that the box is running" in message


def test_jump_host_refusing_our_key_names_the_jump_host(sshd_server, jump_server, tmp_path):
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                   check=True)
    config = _config(tmp_path / "ssh_config", jump_server, stranger)
    target = SshTarget("127.0.0.1", port=sshd_server.port, user="root",
                       identity=sshd_server.client_key, config_file=config,
                       options=("ProxyJump=jumphost",))
    with (SshTransport(target, known_hosts=tmp_path / "kh") as t,
          pytest.raises(AuthenticationFailed) as info):
        t.run("true")
    assert "jump host jumphost" in str(info.value) and "refused our ssh key" in str(info.value)


# -- a passphrase-protected key, no agent -----------------------------------------------------


def _passphrase_key(server: SshServer, tmp_path: Path) -> Path:
    key = tmp_path / "id_secret"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", str(key)],
                   check=True)
    with open(server.authorized_keys, "a") as f:  # the key IS authorized on the box
        f.write(Path(f"{key}.pub").read_text())
    return key


@pytest.fixture
def agent(tmp_path):
    """start() -> SSH_AUTH_SOCK of a fresh ssh-agent (stopped afterwards)."""
    procs: list[subprocess.Popen] = []

    def start() -> str:
        sock = str(tmp_path / "agent.sock")
        proc = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL)
        procs.append(proc)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.05)
        return sock

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


def _ssh_add(key: Path, sock: str, tmp_path: Path) -> None:
    """What the message tells the user to run, with the passphrase typed by SSH_ASKPASS."""
    askpass = tmp_path / "askpass"
    askpass.write_text("#!/bin/sh\necho secret\n")
    askpass.chmod(0o700)
    env = {**os.environ, "SSH_AUTH_SOCK": sock, "SSH_ASKPASS": str(askpass),
           "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
    subprocess.run(["ssh-add", str(key)], env=env, check=True, capture_output=True,
                   stdin=subprocess.DEVNULL)


def test_passphrase_key_without_agent_says_ssh_add_not_add_your_key(
    sshd_server, tmp_path, monkeypatch, agent
):
    key = _passphrase_key(sshd_server, tmp_path)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    target = SshTarget("127.0.0.1", port=sshd_server.port, user="root", identity=key)
    with SshTransport(target, known_hosts=sshd_server.known_hosts) as t:
        with pytest.raises(AuthenticationFailed) as info:
            t.run("true")
        message = str(info.value)
        assert "\n" not in message
        assert "passphrase" in message and f"ssh-add {key}" in message
        assert "add your public key" not in message  # it is authorized already

        # The advice works: once an agent holds the key, the same transport connects.
        sock = agent()
        _ssh_add(key, sock, tmp_path)
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        assert t.run("echo unlocked").stdout == "unlocked\n"


def test_passphrase_key_for_the_jump_host_names_the_jump_host(
    sshd_server, jump_server, tmp_path, monkeypatch
):
    key = _passphrase_key(jump_server, tmp_path)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    config = _config(tmp_path / "ssh_config", jump_server, key)
    target = SshTarget("127.0.0.1", port=sshd_server.port, user="root",
                       identity=sshd_server.client_key, config_file=config,
                       options=("ProxyJump=jumphost",))
    with (SshTransport(target, known_hosts=tmp_path / "kh") as t,
          pytest.raises(AuthenticationFailed) as info):
        t.run("true")
    message = str(info.value)
    assert "jump host jumphost" in message and f"ssh-add {key}" in message


# -- ssh:// destinations ---------------------------------------------------------------------


def test_ssh_url_destination_connects(sshd_server):
    target = parse_ssh_command(
        f"ssh -i {sshd_server.client_key} ssh://root@127.0.0.1:{sshd_server.port}"
    )
    assert (target.host, target.port, target.user) == ("127.0.0.1", sshd_server.port, "root")
    with SshTransport(target, known_hosts=sshd_server.known_hosts) as t:
        assert t.run("echo $USER").stdout == "root\n"
