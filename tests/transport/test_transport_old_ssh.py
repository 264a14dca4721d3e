"""A laptop or login node whose OpenSSH is older than 7.6 (RHEL/CentOS 7 ships 7.4): it has
no ``StrictHostKeyChecking=accept-new``. A PATH shim named ``ssh`` answers as 7.4 does (the
version, and the refusal of accept-new) and otherwise runs the real client, so the connection
itself is real."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from sshd import SshServer

from rgt.transport import HostKeyChanged, SshTarget, SshTransport

VERSION = "OpenSSH_7.4p1, OpenSSL 1.0.2k-fips  26 Jan 2017"


@pytest.fixture
def old_ssh(tmp_path, monkeypatch) -> Path:
    """Put an OpenSSH 7.4 `ssh` first on PATH; returns the file that counts `ssh -V` calls."""
    real = shutil.which("ssh")
    shim_dir = tmp_path / "old-ssh-bin"
    shim_dir.mkdir()
    asked = tmp_path / "version-asked"
    shim = shim_dir / "ssh"
    shim.write_text(f"""#!/bin/sh
for arg in "$@"; do
  case "$arg" in
    *accept-new*)
      echo 'command-line line 0: unsupported option "accept-new".' >&2
      exit 255;;
    -V)
      echo . >> {shlex.quote(str(asked))}
      echo '{VERSION}' >&2
      exit 0;;
  esac
done
exec {shlex.quote(real)} "$@"
""")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}{os.pathsep}{os.environ['PATH']}")
    return asked


def _fingerprint(pub: str) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", pub], capture_output=True, text=True).stdout
    return out.split()[1]


def test_old_client_connects_records_the_key_and_refuses_a_changed_one(
    old_ssh, sshd_server, tmp_path
):
    known = tmp_path / "rgt" / "known_hosts"
    t = SshTransport(sshd_server.target, known_hosts=known)
    assert t.run("echo old").stdout == "old\n"
    assert t.host_key_fingerprint() == _fingerprint(f"{sshd_server.host_key}.pub")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_text("x")
    t.put(tmp_path / "src", str(tmp_path / "dst"))  # transfers ride the same ssh
    assert (tmp_path / "dst" / "f").read_text() == "x"
    t.close()

    recorded = known.read_text()
    sshd_server.regenerate_host_key()
    again = SshTransport(sshd_server.target, known_hosts=known)  # a later rgt command
    with pytest.raises(HostKeyChanged) as info:
        again.run("true")
    assert known.read_text() == recorded  # the new key was not learned behind our back
    fix = str(info.value)[str(info.value).index("ssh-keygen -R"):]
    subprocess.run(shlex.split(fix), check=True, capture_output=True)
    assert again.run("echo new").stdout == "new\n"  # first contact again, the new key recorded
    assert again.host_key_fingerprint() == _fingerprint(f"{sshd_server.host_key}.pub")
    again.close()
    assert len(old_ssh.read_text().splitlines()) == 1  # `ssh -V` asked once per process


def test_old_client_through_a_jump_host(old_ssh, sshd_server, sshd_keys, tmp_path_factory,
                                        tmp_path):
    jump = SshServer(tmp_path_factory.mktemp("jump"), keys=sshd_keys).start()
    try:
        config = tmp_path / "ssh_config"
        config.write_text(f"Host jumphost\n    HostName 127.0.0.1\n    Port {jump.port}\n"
                          f"    User root\n    IdentityFile {jump.client_key}\n")
        known = tmp_path / "known_hosts"
        target = SshTarget("127.0.0.1", port=sshd_server.port, user="root",
                           identity=sshd_server.client_key, config_file=config,
                           options=("ProxyJump=jumphost",))
        with SshTransport(target, known_hosts=known) as t:
            assert t.run("echo hop").stdout == "hop\n"
        for port in (jump.port, sshd_server.port):
            assert subprocess.run(["ssh-keygen", "-F", f"[127.0.0.1]:{port}", "-f", str(known)],
                                  capture_output=True).returncode == 0
        jump.regenerate_host_key()
        with (SshTransport(target, known_hosts=known) as t,
              pytest.raises(HostKeyChanged, match="jump host jumphost")):
            t.run("true")
    finally:
        jump.stop()
