"""rgt's file engine (rgt.onbox.xfer) against a hostile sender: on a pull the sender is the box,
so every name, symlink, frame and digest it sends is checked before anything is written here.

The laptop side under test is the real one (`transfer.move`, the `Receiver`); the box is
tests/transport/hostile_box.py, a real process speaking the protocol with the lies its
scenario asks for, or, for the resume cases, the real sender over real OS pipes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from rgt.onbox import xfer
from rgt.transport import LocalTransport, TransportError, transfer

HOSTILE = str(Path(__file__).with_name("hostile_box.py"))
MTIME = 1_700_000_000_000_000_000


def file_entry(name, data: bytes, mtime_ns=MTIME, mode=0o644):
    return [name, len(data), mtime_ns, mode, data.decode("latin-1")]


def pull_from(tmp_path, dest, *, files=(), dirs=(), links=(), evil="", retries=0):
    """Pull into DEST from a hostile box playing SCENARIO; the mover's stats."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"files": list(files), "dirs": list(dirs),
                                    "links": list(links), "evil": evil}))
    return transfer.move([sys.executable, HOSTILE, str(scenario)], local_role="receive",
                         root=dest, what="pulling from the hostile box", timeout=30,
                         retries=retries)


def written(dest: Path) -> list[str]:
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped-abs", "sub/../../escaped",
                                  "sub/./x", "", "a\0b", ".rgt-partial/x", "sub//x"])
def test_names_that_could_leave_the_destination_are_refused(tmp_path, name):
    dest = tmp_path / "dest"
    with pytest.raises(TransportError, match="refused") as info:
        pull_from(tmp_path, dest, dirs=[["sub", 0o755, 0]], files=[file_entry(name, b"owned\n")])
    assert "\n" not in str(info.value)
    assert not (tmp_path / "escaped").exists()
    assert not dest.exists() or written(dest) == [], "nothing may be written"


def test_a_file_in_an_unlisted_directory_is_refused(tmp_path):
    with pytest.raises(TransportError, match="without its parent"):
        pull_from(tmp_path, tmp_path / "dest", files=[file_entry("nodir/x", b"x")])


def test_symlinks_are_made_only_when_they_stay_inside(tmp_path):
    dest = tmp_path / "dest"
    links = [["ok", "sub/f"], ["abs", "/etc/passwd"], ["up", "../outside"],
             ["sub/up2", "../../x"], ["sub/side", "../ok"]]
    stats = pull_from(tmp_path, dest, dirs=[["sub", 0o755, 0]],
                      files=[file_entry("sub/f", b"f\n")], links=links)
    assert os.readlink(dest / "ok") == "sub/f" and (dest / "ok").read_text() == "f\n"
    assert os.readlink(dest / "sub" / "side") == "../ok"
    for refused in ("abs", "up", "sub/up2"):
        assert not os.path.lexists(dest / refused), refused
    assert sorted(stats.skipped) == ["abs", "sub/up2", "up"]


def test_symlinks_already_in_the_destination_are_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep me\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)  # where the sender has a directory
    (dest / "f").symlink_to(outside / "victim")  # where the sender has a file
    (dest / xfer.PARTIAL_DIR).symlink_to(outside)  # where partial files go
    big = os.urandom(9 << 20)  # in ranges: the partial and its record go in .rgt-partial
    pull_from(tmp_path, dest, dirs=[["sub", 0o755, 0]],
              files=[file_entry("sub/new", b"new\n"), file_entry("f", b"mine\n"),
                     file_entry("big", big)])
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_text() == "keep me\n"
    assert (dest / "sub").is_dir() and not (dest / "sub").is_symlink()
    assert (dest / "sub" / "new").read_text() == "new\n"
    assert not (dest / "f").is_symlink() and (dest / "f").read_text() == "mine\n"
    assert (dest / "big").read_bytes() == big


def test_setuid_bits_are_dropped(tmp_path):
    pull_from(tmp_path, tmp_path / "dest", files=[file_entry("tool", b"#!\n", mode=0o6755)])
    assert (tmp_path / "dest" / "tool").stat().st_mode & 0o7777 == 0o755


@pytest.mark.parametrize(("evil", "says"), [
    ("other-piece", "when another piece was asked for"),
    ("oversized", "larger than any"),
    ("bomb", "inflates past a chunk"),
    ("too-much", "more data than range"),
])
def test_a_box_that_breaks_the_protocol_is_refused_and_nothing_lands(tmp_path, evil, says):
    dest = tmp_path / "dest"
    with pytest.raises(TransportError, match=says) as info:
        pull_from(tmp_path, dest, files=[file_entry("a.txt", b"a" * 5000)], evil=evil,
                  retries=3)
    assert "\n" not in str(info.value) and "gave up" not in str(info.value)  # no retry
    assert not (dest / "a.txt").exists()


def test_data_that_does_not_hash_as_sent_is_retried_then_reported_never_kept(tmp_path):
    dest = tmp_path / "dest"
    with pytest.raises(TransportError, match="a.bin") as info:
        pull_from(tmp_path, dest, files=[file_entry("a.bin", os.urandom(6 << 20))],
                  evil="bad-hash")
    assert "changed while it was read" in str(info.value)
    assert not (dest / "a.bin").exists()


def test_a_box_that_dies_mid_piece_leaves_no_file_under_its_name(tmp_path):
    dest = tmp_path / "dest"
    with pytest.raises(TransportError, match="connection dropped"):
        pull_from(tmp_path, dest, files=[file_entry("a.bin", os.urandom(3 << 20))], evil="cut")
    assert not (dest / "a.bin").exists()
    assert written(dest) and all(p.startswith(xfer.PARTIAL_DIR) for p in written(dest))


class Pipes:
    """The real sender (a thread) and the real receiver joined by two OS pipes."""

    def __init__(self) -> None:
        to_receiver, from_sender = os.pipe()
        to_sender, from_receiver = os.pipe()
        self.near = xfer.Link(os.fdopen(to_receiver, "rb"), os.fdopen(from_receiver, "wb"))
        self.far = xfer.Link(os.fdopen(to_sender, "rb"), os.fdopen(from_sender, "wb"))

    def close(self) -> None:
        for link in (self.near, self.far):
            for f in (link.reader, link.writer):
                with contextlib.suppress(OSError):
                    f.close()


def send_ranges(src: Path, entry, pieces, *, stop_after=None):
    """Send PIECES ([(k, offset)]) of ENTRY from SRC over fresh pipes in a thread, cutting
    the stream after STOP_AFTER bytes of data if given; (the pipes, the thread)."""
    pipes = Pipes()

    def play():
        buf = bytearray(xfer.CHUNK)
        try:
            if stop_after is None:
                for k, offset in pieces:
                    xfer.send_piece(pipes.far, str(src), entry, k, offset, buf)
                pipes.far.flush()
                return
            k, offset = pieces[0]
            start, end = xfer.bounds(entry[1], k)
            with open(src / entry[0], "rb") as f:
                f.seek(start + offset)
                data = f.read(stop_after)
            pipes.far.send(b"P", json.dumps({"n": entry[0], "s": entry[1], "m": entry[2],
                                             "o": entry[3], "k": k, "a": offset}).encode())
            for at in range(0, len(data), xfer.CHUNK):
                pipes.far.send(b"D", data[at: at + xfer.CHUNK])
            pipes.far.flush()
        finally:
            pipes.far.writer.close()

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return pipes, thread


def test_a_cut_range_never_carries_the_name_and_resumes_from_what_arrived(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(12 << 20)  # three 4 MiB ranges
    (src / "big.bin").write_bytes(data)
    st = (src / "big.bin").stat()
    entry = ["big.bin", len(data), st.st_mtime_ns, 0o644]
    dest = tmp_path / "dest"
    receiver = xfer.Receiver(str(dest))
    want, have, _ = receiver.plan([], [entry])
    assert want == [[0, 0, 0], [0, 1, 0], [0, 2, 0]] and have == 0

    pipes, thread = send_ranges(src, entry, [(0, 0)])  # range 0 arrives whole
    buf = bytearray(xfer.CHUNK)
    assert xfer.piece_header(pipes.near.recv()[1]) == (entry, 0, 0)
    assert receiver.piece(pipes.near, entry, 0, 0, buf) == ""
    thread.join()
    pipes.close()

    pipes, thread = send_ranges(src, entry, [(1, 0)], stop_after=1_500_000)  # range 1: cut
    pipes.near.recv()
    with pytest.raises(EOFError):
        receiver.piece(pipes.near, entry, 1, 0, buf)
    thread.join()
    pipes.close()
    assert not (dest / "big.bin").exists(), "a half file must not carry the real name"

    again = xfer.Receiver(str(dest))  # the next attempt: a new process asks what is here
    want, have, _ = again.plan([], [entry])
    assert want == [[0, 1, 1_500_000], [0, 2, 0]]
    assert have == (4 << 20) + 1_500_000
    pipes, thread = send_ranges(src, entry, [(1, 1_500_000), (2, 0)])
    sent_before = 0
    for k, offset in ([1, 1_500_000], [2, 0]):
        pipes.near.recv()
        assert again.piece(pipes.near, entry, k, offset, buf) == ""
    thread.join()
    sent_before = pipes.far.sent
    pipes.close()
    assert sent_before < (8 << 20) - 1_500_000 + 4096  # only what was missing travelled
    assert again.commit(entry) == ""
    assert (dest / "big.bin").read_bytes() == data
    assert (dest / "big.bin").stat().st_mtime_ns == st.st_mtime_ns
    again.finish([], [], clean=True)
    assert not (dest / xfer.PARTIAL_DIR).exists()


def test_a_record_that_no_longer_matches_the_disk_is_not_trusted(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(9 << 20)
    (src / "f").write_bytes(data)
    entry = ["f", len(data), (src / "f").stat().st_mtime_ns, 0o644]
    dest = tmp_path / "dest"
    receiver = xfer.Receiver(str(dest))
    receiver.plan([], [entry])
    pipes, thread = send_ranges(src, entry, [(0, 0)])
    pipes.near.recv()
    assert receiver.piece(pipes.near, entry, 0, 0, bytearray(xfer.CHUNK)) == ""
    thread.join()
    pipes.close()
    partial = dest / xfer.PARTIAL_DIR / xfer.partial_name("f", len(data), entry[2])
    with open(partial, "r+b") as f:  # the disk lost a byte of a range recorded as verified
        f.seek(100)
        f.write(b"\0" if data[100] else b"\1")
    want, have, _ = xfer.Receiver(str(dest)).plan([], [entry])
    assert [0, 0, 0] in want and have == 0


def test_a_partial_of_another_version_is_not_resumed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(9 << 20))
    old = ["f", 9 << 20, MTIME, 0o644]
    os.utime(src / "f", ns=(MTIME, MTIME))
    dest = tmp_path / "dest"
    receiver = xfer.Receiver(str(dest))
    receiver.plan([], [old])
    pipes, thread = send_ranges(src, old, [(0, 0)])
    pipes.near.recv()
    assert receiver.piece(pipes.near, old, 0, 0, bytearray(xfer.CHUNK)) == ""
    thread.join()
    pipes.close()
    new = ["f", 9 << 20, MTIME + 10**9, 0o644]
    want, have, _ = xfer.Receiver(str(dest)).plan([], [new])
    assert want == [[0, 0, 0], [0, 1, 0], [0, 2, 0]] and have == 0


def test_the_grid_depends_on_the_size_alone():
    assert xfer.range_count(0) == 1 and xfer.range_count(xfer.RANGE_MIN) == 1
    assert xfer.range_count(xfer.RANGE_MIN + 1) == 2
    one_gib = 1 << 30
    assert xfer.range_size(one_gib) == xfer.RANGE_MIN  # 256 ranges
    assert xfer.range_size(100 * one_gib) == xfer.RANGE_MAX
    size = 10 * one_gib + 12345
    ends = [xfer.bounds(size, k) for k in range(xfer.range_count(size))]
    assert ends[0][0] == 0 and ends[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:], strict=False))


def test_text_is_compressed_on_the_wire_and_checkpoints_are_not():
    assert xfer.compressible("logs/train.log") and xfer.compressible("metrics.JSONL")
    assert not xfer.compressible("ckpt/step_100.pt")
    assert not xfer.compressible("model.safetensors") and not xfer.compressible("data.tar.gz")


@pytest.mark.parametrize(("pattern", "path", "is_dir", "hit"), [
    ("*.pyc", "a/b/x.pyc", False, True),
    (".git", "pkg/.git", True, True),
    ("/build", "build", True, True),
    ("/build", "src/build", True, False),
    ("data/", "x/data", True, True),
    ("data/", "x/data", False, False),
    ("sub/*.tmp", "x/sub/a.tmp", False, True),
    ("sub/*.tmp", "sub/d/a.tmp", False, False),
    ("**/cache", "a/b/cache", True, True),
    ("f[0-9].txt", "f7.txt", False, True),
    ("f[!0-9].txt", "f7.txt", False, False),
])
def test_excludes_mean_what_they_mean_to_rsync(pattern, path, is_dir, hit):
    assert xfer.excluded(xfer.compile_excludes([pattern]), path, is_dir) is hit


def test_a_full_disk_stops_at_once_and_leaves_no_file_under_its_name(tmp_path, tmpfs):
    disk = tmpfs("size=1m")
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(3 << 20))
    with pytest.raises(TransportError, match="disk is full") as info:
        LocalTransport().put(src, str(disk / "code"), retries=3)
    assert "\n" not in str(info.value)
    assert not (disk / "code" / "big.bin").exists()
