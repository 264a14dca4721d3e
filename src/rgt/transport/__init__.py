"""How commands and files reach a box: `LocalTransport` (this machine) and `SshTransport`
(the user's OpenSSH client + rsync), behind one small `Transport` protocol."""

from rgt.transport.base import (
    AuthenticationFailed,
    BashMissing,
    CommandTimeout,
    HostKeyChanged,
    HostKeyUnknown,
    PassphraseNeeded,
    Result,
    TransferStats,
    Transport,
    TransportError,
    Unreachable,
)
from rgt.transport.local import LocalTransport
from rgt.transport.ssh import SshTarget, SshTransport, parse_ssh_command

__all__ = [
    "AuthenticationFailed",
    "BashMissing",
    "CommandTimeout",
    "HostKeyChanged",
    "HostKeyUnknown",
    "LocalTransport",
    "PassphraseNeeded",
    "Result",
    "SshTarget",
    "SshTransport",
    "TransferStats",
    "Transport",
    "TransportError",
    "Unreachable",
    "parse_ssh_command",
]
