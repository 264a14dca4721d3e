"""LocalTransport: the same run/put/get semantics as SshTransport, on this machine."""

import os
import signal
import threading
import time

import pytest

from rgt.errors import UserError
from rgt.onbox import xfer
from rgt.transport import CommandTimeout, LocalTransport, Transport, TransportError, transfer


@pytest.fixture
def local():
    return LocalTransport()


def test_is_a_transport(local):
    assert isinstance(local, Transport)


def test_run_returns_stdout_stderr_and_rc(local):
    r = local.run("echo out; echo err >&2; exit 3", check=False)
    assert (r.rc, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)


def test_command_is_run_by_bash(local):
    assert local.run('arr=(a b c); echo "${arr[1]}"').stdout == "b\n"


def test_failed_command_raises_a_user_error_with_rc_and_stderr(local):
    with pytest.raises(TransportError, match=r"`exit 4 # first` on localhost .*code 4") as info:
        local.run("exit 4 # first\nsecond")
    assert isinstance(info.value, UserError) and info.value.rc == 4


def test_stdin_is_delivered(local):
    assert local.run("wc -c", stdin=b"x" * 123_456).stdout.strip() == "123456"


def test_timeout_raises_and_kills_the_whole_command(local, tmp_path):
    flag = tmp_path / "survived"
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        local.run(f"(sleep 2; touch {flag}) & sleep 30", timeout=0.5)
    assert time.monotonic() - started < 3
    time.sleep(2.5)
    assert not flag.exists(), "a child of the timed-out command kept running"


def test_put_and_get_round_trip(local, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha\n")
    (src / "sub" / "b.bin").write_bytes(os.urandom(50_000))
    (src / "skip.tmp").write_text("no\n")
    stats = local.put(src, str(tmp_path / "box" / "code"), exclude=["*.tmp"])
    assert stats.attempts == 1 and stats.files == 2 and stats.bytes_sent > 50_000
    assert (tmp_path / "box" / "code" / "sub" / "b.bin").read_bytes() == (
        src / "sub" / "b.bin"
    ).read_bytes()
    assert not (tmp_path / "box" / "code" / "skip.tmp").exists()

    stats = local.get(str(tmp_path / "box" / "code"), tmp_path / "back")
    assert (tmp_path / "back" / "a.txt").read_text() == "alpha\n"
    assert stats.attempts == 1 and stats.files == 2


def test_missing_paths_are_user_errors(local, tmp_path):
    with pytest.raises(TransportError, match="does not exist"):
        local.put(tmp_path / "nope", str(tmp_path / "dst"))
    with pytest.raises(TransportError, match="does not exist"):
        local.get(str(tmp_path / "nope"), tmp_path / "dst")


def test_unwritable_destination_is_not_retried(local, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_text("a")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    started = time.monotonic()
    with pytest.raises(TransportError, match="cannot create directory"):
        local.put(src, str(blocker / "sub"))
    assert time.monotonic() - started < 3


def _far_side_of_this_process() -> int | None:
    """The pid of the engine's far side that this test process started (its argv carries the
    bootstrap), from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"rgt-xfer" in argv:
            return int(entry)
    return None


def test_a_far_side_that_stops_moving_is_cut_off_and_the_next_attempt_resumes(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(transfer, "IO_TIMEOUT", 1)  # a dead link is noticed after 1 s here
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(16 << 20)
    (src / "big.bin").write_bytes(data)
    dest = tmp_path / "dest"
    frozen: list[int] = []

    def freeze_once() -> None:  # the far side hangs mid-file, as behind a dead link
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            partials = [p for p in dest.glob(".rgt-partial/*")
                        if not p.name.endswith(xfer.RANGES_SUFFIX)]  # the data, not its record
            pid = _far_side_of_this_process()
            if pid and partials and partials[0].stat().st_size > (4 << 20):
                os.kill(pid, signal.SIGSTOP)
                frozen.append(pid)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=freeze_once, daemon=True)
    thread.start()
    started = time.monotonic()
    stats = LocalTransport(bwlimit=8_000_000).put(src, str(dest), retries=2)
    thread.join()
    assert frozen, "the far side was never frozen"
    assert stats.attempts == 2 and (dest / "big.bin").read_bytes() == data
    assert stats.bytes_sent < 1.5 * len(data)  # resumed, not resent
    assert time.monotonic() - started < 15


def test_an_attempt_past_its_time_limit_resumes_and_then_gives_up_in_one_line(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(6 << 20)
    (src / "big.bin").write_bytes(data)
    slow = LocalTransport(bwlimit=4_000_000)  # 1.5 s of data, 0.8 s per attempt
    stats = slow.put(src, str(tmp_path / "dest"), timeout=0.8, retries=5)
    assert stats.attempts >= 2 and (tmp_path / "dest" / "big.bin").read_bytes() == data
    assert stats.bytes_sent < 1.5 * len(data)

    with pytest.raises(TransportError, match=r"ran past its 0.5s limit \(gave up after 2 ") as e:
        slow.put(src, str(tmp_path / "other"), timeout=0.5, retries=1)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "other" / "big.bin").exists()
