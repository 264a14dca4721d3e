"""SshTransport against a real sshd on 127.0.0.1."""

import os
import re
import secrets
import shlex
import subprocess
import threading
import time

import pytest

from rgt.errors import UserError
from rgt.transport import (
    AuthenticationFailed,
    CommandTimeout,
    HostKeyChanged,
    SshTarget,
    SshTransport,
    Transport,
    TransportError,
    Unreachable,
)


def test_is_a_transport(ssh):
    assert isinstance(ssh, Transport)


def test_run_returns_stdout_stderr_and_rc(ssh):
    r = ssh.run("echo out; echo err >&2; exit 3", check=False)
    assert (r.rc, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)
    assert ssh.run("printf ok").ok


def test_command_is_run_by_bash(ssh):
    r = ssh.run('[[ -n "$BASH_VERSION" ]] && arr=(a b c) && echo "${arr[2]}"')
    assert r.stdout == "c\n"


def test_failed_command_raises_with_rc_first_line_and_stderr(ssh):
    with pytest.raises(TransportError) as info:
        ssh.run("echo boom >&2; exit 7\necho second line")
    err = info.value
    assert isinstance(err, UserError)
    assert err.rc == 7
    assert "echo boom >&2; exit 7" in str(err) and "second line" not in str(err)
    assert "boom" in str(err) and "code 7" in str(err)


def test_stdin_is_delivered_byte_exact(ssh):
    payload = os.urandom(300_000)
    r = ssh.run("sha256sum | cut -d' ' -f1", stdin=payload)
    import hashlib

    assert r.stdout.strip() == hashlib.sha256(payload).hexdigest()


def test_timeout_raises(ssh):
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="within 1s"):
        ssh.run("sleep 20", timeout=1)
    assert time.monotonic() - started < 5
    assert ssh.run("echo still usable").stdout == "still usable\n"


def test_ssh_config_alias_works(sshd_server):
    config = sshd_server.write_ssh_config("box-alias")
    target = SshTarget("box-alias", config_file=config)
    with SshTransport(target, known_hosts=sshd_server.known_hosts) as t:
        assert t.run("echo $USER@$SSH_CONNECTION").stdout.startswith("root@127.0.0.1")
        assert t.known_hosts_name() == f"[127.0.0.1]:{sshd_server.port}"
    # Without the config file the alias means nothing: proof the file was what made it work.
    empty = sshd_server.workdir / "empty_config"
    empty.write_text("")
    bare = SshTransport(
        SshTarget("box-alias", config_file=empty), known_hosts=sshd_server.known_hosts
    )
    with pytest.raises(Unreachable, match="box-alias"):
        bare.run("true")


def _fingerprint(pub_key) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", str(pub_key)], capture_output=True, text=True)
    return re.search(r"SHA256:\S+", out.stdout).group(0)


def test_first_contact_records_the_host_key(sshd_server, ssh):
    assert ssh.host_key_fingerprint() is None
    ssh.run("true")
    assert ssh.host_key_fingerprint() == _fingerprint(f"{sshd_server.host_key}.pub")


def test_changed_host_key_is_refused_and_the_message_names_the_fix(sshd_server, ssh):
    ssh.run("true")
    recorded = sshd_server.known_hosts.read_text()
    old = ssh.host_key_fingerprint()
    ssh.close()
    sshd_server.regenerate_host_key()

    with pytest.raises(HostKeyChanged) as info:
        ssh.run("true")
    message = str(info.value)
    assert isinstance(info.value, UserError) and "\n" not in message
    assert "changed" in message and str(sshd_server.known_hosts) in message
    assert sshd_server.known_hosts.read_text() == recorded  # never silently replaced
    assert ssh.host_key_fingerprint() == old

    # Following the advice in the message is enough to connect again.
    fix = message[message.index("ssh-keygen -R"):]
    subprocess.run(shlex.split(fix), check=True, capture_output=True)
    assert ssh.run("echo back").stdout == "back\n"
    assert ssh.host_key_fingerprint() == _fingerprint(f"{sshd_server.host_key}.pub")


def test_changed_host_key_is_refused_by_transfers_too(sshd_server, ssh, tmp_path,
                                                     transfer_attempts):
    ssh.run("true")
    ssh.close()
    sshd_server.regenerate_host_key()
    (tmp_path / "src").mkdir()
    started = time.monotonic()
    with pytest.raises(HostKeyChanged):
        ssh.put(tmp_path / "src", str(tmp_path / "dst"))
    assert len(transfer_attempts) == 1  # not retried
    assert time.monotonic() - started < 5


def test_unreachable_names_host_and_port(sshd_server, ssh):
    sshd_server.stop()
    with pytest.raises(Unreachable, match=f"127.0.0.1:{sshd_server.port}") as info:
        ssh.run("true")
    assert isinstance(info.value, UserError)


def test_wrong_key_is_an_authentication_error(sshd_server, tmp_path):
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    target = SshTarget("127.0.0.1", port=sshd_server.port, user="root", identity=stranger)
    with (
        SshTransport(target, known_hosts=sshd_server.known_hosts) as t,
        pytest.raises(AuthenticationFailed, match="refused our ssh key"),
    ):
        t.run("true")


def test_next_run_reconnects_after_the_connection_is_killed(sshd_server, ssh):
    first = ssh.run("echo $PPID").stdout
    sshd_server.kill()  # the master's connection dies with it
    sshd_server.restart()
    assert ssh.run("echo again").stdout == "again\n"
    assert ssh.run("echo $PPID").stdout != first


def test_secret_on_stdin_never_appears_in_any_cmdline(ssh):
    secret = "rgt-secret-" + secrets.token_hex(16)
    marker = "sleep 1.7" + str(secrets.randbelow(1000))  # proves the scan sees the box side
    seen_marker = threading.Event()
    leaks: list[str] = []
    done = threading.Event()

    def scan() -> None:
        while not done.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if secret in cmdline:
                    leaks.append(cmdline)
                if marker in cmdline:
                    seen_marker.set()

    scanner = threading.Thread(target=scan)
    scanner.start()
    try:
        r = ssh.run(f'read -r token; {marker}; echo "${{#token}}"', stdin=secret.encode() + b"\n")
    finally:
        done.set()
        scanner.join()
    assert r.stdout.strip() == str(len(secret))  # the secret did arrive
    assert seen_marker.is_set(), "the /proc scan never saw the running command"
    assert leaks == []


def test_known_hosts_path_with_spaces(sshd_server, tmp_path):
    known = tmp_path / "Application Support" / "rgt" / "known_hosts"
    with SshTransport(sshd_server.target, known_hosts=known) as t:
        assert t.run("echo ok").stdout == "ok\n"
        (tmp_path / "src").mkdir()
        (tmp_path / "src" / "f").write_text("x")
        t.put(tmp_path / "src", str(tmp_path / "dst"))
    assert (tmp_path / "dst" / "f").read_text() == "x"
    assert "127.0.0.1" in known.read_text() or known.read_text().startswith("|1|")
