"""Fixtures for transport tests: a real sshd per test (keys made once per session)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `import sshd`

from sshd import SshServer, sshd_keys, sshd_server  # noqa: E402, F401  (fixtures)

from rgt.transport import SshTransport, transfer  # noqa: E402


@pytest.fixture
def ssh(sshd_server: SshServer):  # noqa: F811  (the fixture imported above)
    """An SshTransport to the test's sshd, its master connection closed afterwards."""
    transport = SshTransport(sshd_server.target, known_hosts=sshd_server.known_hosts)
    yield transport
    transport.close()


@pytest.fixture
def transfer_attempts(monkeypatch) -> list[list[str]]:
    """The far-side argv of every session a transfer starts (retries included), in order."""
    seen: list[list[str]] = []
    real = transfer._start

    def counted(argv, stderr):
        seen.append(list(argv))
        return real(argv, stderr)

    monkeypatch.setattr(transfer, "_start", counted)
    return seen
