from pathlib import Path

import pytest

from rgt.errors import UserError
from rgt.transport import SshTarget, parse_ssh_command


def test_autodl_connection_string():
    t = parse_ssh_command("ssh -p 38211 root@connect.westb.seetacloud.com")
    assert t == SshTarget("connect.westb.seetacloud.com", port=38211, user="root")


def test_identity_options_and_login_name():
    t = parse_ssh_command(
        "ssh -i ~/.ssh/box_key -o ProxyJump=bastion -oCompression=yes -l ubuntu -p2222 1.2.3.4"
    )
    assert t.host == "1.2.3.4"
    assert t.port == 2222
    assert t.user == "ubuntu"
    assert t.identity == Path("~/.ssh/box_key").expanduser()
    assert t.options == ("ProxyJump=bastion", "Compression=yes")


def test_bare_alias_needs_no_user_or_port():
    assert parse_ssh_command("my-box") == SshTarget("my-box")
    assert parse_ssh_command("ssh my-box") == SshTarget("my-box")


def test_forwards_and_cosmetic_flags_are_ignored():
    t = parse_ssh_command("ssh -p 12345 root@ssh4.vast.ai -L 8080:localhost:8080 -A")
    assert t == SshTarget("ssh4.vast.ai", port=12345, user="root")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("ssh ssh://root@box.example.com:2222", SshTarget("box.example.com", 2222, "root")),
        ("ssh://box.example.com", SshTarget("box.example.com")),
        ("ssh ssh://ubuntu@[2001:db8::1]:22", SshTarget("2001:db8::1", 22, "ubuntu")),
        ("ssh -p 3333 -l admin ssh://root@h:2222", SshTarget("h", 3333, "admin")),  # as ssh does
        ("ssh -J ssh://me@bastion:2200 ssh://root@h",
         SshTarget("h", None, "root", options=("ProxyJump=ssh://me@bastion:2200",))),
    ],
)
def test_ssh_url_destinations_are_read_as_openssh_reads_them(text, expected):
    assert parse_ssh_command(text) == expected


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "empty ssh command"),
        ("ssh", "empty ssh command"),
        ("ssh -p", "needs a value"),
        ("ssh -p abc root@host", "port must be a number"),
        ("ssh -p ² root@host", "port must be a number"),
        ("ssh -p 70000 root@host", "between 1 and 65535"),
        ("ssh -p 22", "no host"),
        ("ssh root@host:2222", "-p PORT"),
        ("ssh -Z root@host", "unsupported ssh option -Z"),
        ("ssh root@host rm -rf /", "unexpected 'rm'"),
        ("ssh ssh://root@host:22/path", "ssh:// URL"),
        ("ssh ssh://root@host:port", "port must be a number"),
        ("ssh ssh://root@", "no host"),
        ("ssh @host", "empty user name"),
        ("ssh 'unterminated", "cannot read"),
        ("ssh -o Nonsense root@host", "Key=Value"),
    ],
)
def test_nonsense_is_a_user_error_saying_what_was_expected(text, says):
    with pytest.raises(UserError, match=says) as info:
        parse_ssh_command(text)
    assert "\n" not in str(info.value)
