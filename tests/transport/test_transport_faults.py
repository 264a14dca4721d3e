"""Transfers over several real ssh streams when things go wrong: a stream killed mid-range, every
connection cut half-way, a file that changes while it is read, a disk that fills up. Whatever
happens, no file carries its name before all of it is there and verified."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time

import pytest

from rgt.onbox import xfer
from rgt.transport import LocalTransport, SshTransport, TransportError

MIB = 1 << 20


def digest(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def tree(root, big_mib=96, small=50):
    (root / "logs").mkdir(parents=True)
    with open(root / "big.bin", "wb") as f:
        for _ in range(big_mib // 8):
            f.write(os.urandom(8 * MIB))
    for i in range(small):
        (root / "logs" / f"{i:03d}.log").write_text(f"step {i} loss 0.{i:03d}\n" * 200)
    return root


def same_tree(a, b) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        digest(a / f) == digest(b / f) for f in files)


def stream_pids() -> list[int]:
    """This process's ssh clients that carry a transfer stream on a connection of their own."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and argv[0] == b"ssh" and b"ControlPath=none" in argv:
            found.append(int(entry))
    return found


def at_fraction(fraction, action):
    """A progress callback that runs ACTION once, when FRACTION of the bytes are there."""
    fired = threading.Event()

    def progress(done, total):
        if total and done >= fraction * total and not fired.is_set():
            fired.set()
            action()

    progress.fired = fired
    return progress


@pytest.fixture
def streams3(sshd_server):
    t = SshTransport(sshd_server.target, known_hosts=sshd_server.known_hosts, streams=3)
    yield t
    t.close()


@pytest.mark.parametrize("direction", ["put", "get"])
def test_a_stream_killed_mid_range_is_replaced_and_the_tree_arrives_whole(
        streams3, tmp_path, direction):
    src = tree(tmp_path / "src")
    dest = tmp_path / "dest"
    killed: list[int] = []

    def kill_one_stream():
        pids = stream_pids()
        if pids:
            os.kill(pids[0], signal.SIGKILL)  # the ssh process itself: its link dies at once
            killed.append(pids[0])

    progress = at_fraction(0.4, kill_one_stream)
    if direction == "put":
        stats = streams3.put(src, str(dest), progress=progress)
    else:
        stats = streams3.get(str(src), dest, progress=progress)
    assert killed, "no stream of its own connection was running at 40%"
    assert stats.attempts >= 2 and stats.streams >= 2
    assert same_tree(src, dest)
    assert not (dest / xfer.PARTIAL_DIR).exists()
    moved = stats.bytes_sent if direction == "put" else stats.bytes_received
    assert moved < 1.3 * 96 * MIB, stats  # the dead stream's ranges resumed, not resent


def test_a_transfer_cut_half_way_sends_little_more_than_a_clean_one(
        sshd_server, streams3, tmp_path):
    src = tree(tmp_path / "src", big_mib=128)
    clean = streams3.put(src, str(tmp_path / "clean")).bytes_sent

    def cut_every_connection():
        sshd_server.kill()
        threading.Timer(0.5, sshd_server.start).start()

    progress = at_fraction(0.5, cut_every_connection)
    cut = streams3.put(src, str(tmp_path / "cut"), progress=progress)
    assert progress.fired.is_set() and cut.attempts == 2  # one cut: one failure, all streams
    assert same_tree(src, tmp_path / "cut")
    assert cut.bytes_sent < 1.08 * clean, (cut.bytes_sent, clean)


def test_a_file_changed_while_read_is_sent_again_as_its_new_version(streams3, tmp_path):
    src = tree(tmp_path / "src", big_mib=48, small=5)
    new = os.urandom(48 * MIB)

    def rewrite():  # the job writes a new version while the old one is on its way
        with open(src / "big.bin", "r+b") as f:
            f.write(new)
        os.utime(src / "big.bin", ns=(time.time_ns(), time.time_ns() + 10**9))

    progress = at_fraction(0.3, rewrite)
    streams3.put(src, str(tmp_path / "dest"), progress=progress)
    assert progress.fired.is_set()
    assert (tmp_path / "dest" / "big.bin").read_bytes() == new
    assert same_tree(src, tmp_path / "dest")


def test_a_file_that_never_stops_changing_is_reported_and_never_lands(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "steady.txt").write_text("done\n")
    growing = src / "train.log"
    growing.write_bytes(os.urandom(12 * MIB))
    stop = threading.Event()

    def writer():
        with open(growing, "ab") as f:
            while not stop.is_set():
                f.write(b"step\n")
                f.flush()
                time.sleep(0.002)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(TransportError, match=r"train\.log \(it changed while it was read"):
            LocalTransport(bwlimit=40_000_000).put(src, str(tmp_path / "dest"), retries=1)
    finally:
        stop.set()
        thread.join()
    assert not (tmp_path / "dest" / "train.log").exists()
    assert (tmp_path / "dest" / "steady.txt").read_text() == "done\n"


def test_a_full_disk_on_the_box_stops_every_stream_at_once(streams3, tmp_path, tmpfs):
    disk = tmpfs("size=24m")
    src = tree(tmp_path / "src", big_mib=40, small=10)
    started = time.monotonic()
    with pytest.raises(TransportError, match="disk is full") as info:
        streams3.put(src, str(disk / "code"), retries=3)
    assert "\n" not in str(info.value) and "gave up" not in str(info.value)
    assert time.monotonic() - started < 30
    assert not (disk / "code" / "big.bin").exists()


def test_a_full_disk_here_on_a_pull_is_said_once_and_nothing_half_lands(
        streams3, tmp_path, tmpfs):
    disk = tmpfs("size=16m")
    src = tree(tmp_path / "src", big_mib=24, small=10)
    with pytest.raises(TransportError, match="disk is full") as info:
        streams3.get(str(src), disk / "pulled")
    assert "\n" not in str(info.value)
    assert not (disk / "pulled" / "big.bin").exists()
