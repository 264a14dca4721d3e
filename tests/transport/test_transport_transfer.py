"""put/get over a real sshd: round trips, errors, and resuming after the link dies mid-file."""

import contextlib
import hashlib
import os
import threading
import time

import pytest
from oldpython import NO_PY38, PY38

from rgt.onbox.xfer import PARTIAL_DIR
from rgt.transport import SshTransport, TransportError, Unreachable

BIG = 200 * 1024 * 1024


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def make_tree(root):
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "with space.bin").write_bytes(os.urandom(70_000))
    (root / "sub" / "deeper" / "c.py").write_text("print('c')\n")
    (root / "cache.tmp").write_text("skip me\n")
    (root / "sub" / "x.tmp").write_text("skip me too\n")
    return root


def listing(root):
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def big_dir(tmp_path_factory):
    """A directory holding one 200 MB incompressible file (made once for the module)."""
    root = tmp_path_factory.mktemp("big")
    with open(root / "big.bin", "wb") as f:
        for _ in range(BIG // (8 << 20)):
            f.write(os.urandom(8 << 20))
    return root, sha256(root / "big.bin")


def test_put_and_get_round_trip_with_excludes(ssh, tmp_path):
    src = make_tree(tmp_path / "src")
    remote = tmp_path / "box" / "run-1" / "code"  # parents do not exist yet
    seen: list[tuple[int, int]] = []
    stats = ssh.put(src, str(remote), exclude=["*.tmp"], progress=lambda d, t: seen.append((d, t)))
    expected = {k: v for k, v in listing(src).items() if not k.endswith(".tmp")}
    assert listing(remote) == expected
    assert stats.attempts == 1 and stats.files == 3
    assert stats.bytes_sent > 70_000 and stats.bytes_received > 0
    assert seen and seen[-1][0] == seen[-1][1] == sum(len(v) for v in expected.values())

    back = tmp_path / "back"
    stats = ssh.get(str(remote), back)
    assert listing(back) == expected
    assert stats.bytes_received > 70_000 and stats.attempts == 1


def test_put_accepts_a_home_relative_remote(ssh, tmp_path):
    src = make_tree(tmp_path / "src")
    name = f"rgt-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        ssh.put(src, f"~/{name}/code")
        assert ssh.run(f"cat ~/{name}/code/a.txt").stdout == "alpha\n"
    finally:
        ssh.run(f"rm -rf ~/{name}")


def test_get_of_a_missing_directory_fails_at_once(ssh, tmp_path, transfer_attempts):
    started = time.monotonic()
    with pytest.raises(TransportError, match="No such file") as info:
        ssh.get(str(tmp_path / "nope"), tmp_path / "dst")
    assert "after" not in str(info.value)  # not a transient failure: no retries
    assert len(transfer_attempts) == 1
    assert time.monotonic() - started < 5


def test_put_gives_up_after_its_retries_when_the_box_stays_down(
    sshd_server, ssh, tmp_path, transfer_attempts
):
    src = make_tree(tmp_path / "src")
    sshd_server.stop()
    with pytest.raises(Unreachable, match=f"127.0.0.1:{sshd_server.port}"):
        ssh.put(src, str(tmp_path / "dst"), retries=1)
    assert len(transfer_attempts) == 2  # the first attempt and its one retry


class Saboteur:
    """Drops every connection once `fraction` of the big file has *arrived* (any file under
    `watch`, temp and partial files included), and brings sshd back half a second later.

    Watching arrival, not rsync's progress (which updates about once a second and counts
    what is still in flight), makes the cut land mid-file for real."""

    def __init__(self, server, watch, fraction=0.6):
        self.server, self.watch, self.threshold = server, watch, fraction * BIG
        self.fired = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _arrived(self) -> int:
        sizes = [0]
        for root, _dirs, files in os.walk(self.watch):
            for name in files:
                with contextlib.suppress(OSError):
                    sizes.append(os.lstat(os.path.join(root, name)).st_size)
        return max(sizes)

    def _watch(self):
        while not self.stopped.is_set():
            if self._arrived() >= self.threshold:
                self.server.kill()
                self.fired.set()
                time.sleep(0.5)
                self.server.start()
                return
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join()


def cut_mid_file(sshd_server, dest, digest, transfer):
    """Run `transfer(transport)` (throttled to 60 MB/s) while a Saboteur drops every connection
    mid-way through the big file arriving under `dest`; check it finished intact after more
    than one attempt, and return its stats."""
    t = SshTransport(
        sshd_server.target, known_hosts=sshd_server.known_hosts, bwlimit=60_000_000
    )
    try:
        with Saboteur(sshd_server, dest) as saboteur:
            stats = transfer(t)
    finally:
        t.close()
    assert saboteur.fired.is_set()
    assert stats.attempts > 1
    assert sha256(dest / "big.bin") == digest
    assert not (dest / PARTIAL_DIR).exists()
    return stats


def test_put_resumes_after_the_connection_dies_mid_file(sshd_server, big_dir, tmp_path):
    src, digest = big_dir
    dest = tmp_path / "pushed"
    stats = cut_mid_file(sshd_server, dest, digest, lambda t: t.put(src, str(dest), timeout=120))
    # 60% had arrived before the cut; resending everything would total >= 1.6x.
    assert stats.bytes_sent < 1.5 * BIG, stats


def test_get_resumes_after_the_connection_dies_mid_file(sshd_server, big_dir, tmp_path):
    src, digest = big_dir
    box = tmp_path / "on-box"
    box.mkdir()
    os.link(src / "big.bin", box / "big.bin")
    dest = tmp_path / "pulled"
    stats = cut_mid_file(sshd_server, dest, digest, lambda t: t.get(str(box), dest, timeout=120))
    assert stats.bytes_received < 1.5 * BIG, stats


def test_get_never_creates_a_symlink_that_leaves_the_destination(ssh, tmp_path):
    box = tmp_path / "on-box"
    (box / "sub").mkdir(parents=True)
    (box / "sub" / "f.txt").write_text("data\n")
    (box / "inside").symlink_to("sub/f.txt")
    (box / "abs").symlink_to("/etc/passwd")
    (box / "sub" / "up").symlink_to("../../../outside")
    dest = tmp_path / "pulled"
    stats = ssh.get(str(box), dest)
    assert (dest / "inside").read_text() == "data\n" and (dest / "inside").is_symlink()
    assert not os.path.lexists(dest / "abs") and not os.path.lexists(dest / "sub" / "up")
    assert sorted(stats.skipped) == ["abs", "sub/up"]
    assert not (tmp_path / "outside").exists()


@pytest.mark.may_skip
@pytest.mark.skipif(PY38 is None, reason=NO_PY38)
def test_the_box_side_of_a_transfer_runs_on_python_38(sshd_server, tmp_path):
    """The engine's far side is the box's interpreter, as old as 3.8: push and pull with it."""
    t = SshTransport(sshd_server.target, known_hosts=sshd_server.known_hosts, python=PY38)
    try:
        src = make_tree(tmp_path / "src")
        t.put(src, str(tmp_path / "box"), exclude=["*.tmp"])
        stats = t.get(str(tmp_path / "box"), tmp_path / "back")
    finally:
        t.close()
    expected = {k: v for k, v in listing(src).items() if not k.endswith(".tmp")}
    assert listing(tmp_path / "back") == expected and stats.files == len(expected)
