"""rgt's file engine (rgt.onbox.xfer) against a hostile sender: on a pull the sender is the box,
so every name, symlink and frame it sends is checked before anything is written here.

The receiver under test is the real one; the sender is either the real one or a script of
frames that a broken or malicious box could send, over real OS pipes.
"""

from __future__ import annotations

import contextlib
import os
import threading

import pytest

from rgt.onbox import xfer
from rgt.transport import LocalTransport, TransportError


class Peer:
    """Two OS pipes: `near` is the receiver's end, `far` the sender's."""

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


def receive_from(script, dest, tally=None):
    """Run the real receiver into DEST while SCRIPT(far_link) plays the sender in a thread."""
    peer = Peer()
    tally = tally or xfer.Tally()

    def play():
        try:
            script(peer.far)
        except (OSError, EOFError, ValueError):
            pass  # the receiver hung up on us: that is what the test checks
        finally:
            with contextlib.suppress(OSError):
                peer.far.writer.close()

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    try:
        xfer.receive(peer.near, str(dest), tally)
    finally:
        peer.near.writer.close()
        thread.join(10)
        peer.close()
    return tally


def sender(dirs=(), files=(), links=(), body=None):
    """A scripted sender: LIST, read WANT, then BODY(far, want) or each wanted file whole."""

    def script(far):
        far.send_json({"op": "list", "dirs": list(dirs), "files": [f[:4] for f in files],
                       "links": list(links)})
        far.flush()
        want = far.recv_json("want")["files"]
        if body is not None:
            body(far, want)
            return
        for i, offset in want:
            far.send(b"F", xfer._FILE.pack(i, offset))
            data = files[i][4][offset:]
            if data:
                far.send(b"D", data)
            far.send(b"E", xfer._END.pack(len(files[i][4]), files[i][2]))
        far.send_json({"op": "fin", "problems": []})
        far.flush()
        far.recv_json("done")

    return script


def file_entry(name, data, mtime_ns=1_700_000_000_000_000_000):
    return [name, len(data), mtime_ns, 0o644, data]


@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped-abs", "sub/../../escaped",
                                  "sub/./x", "", "a\0b", ".rgt-partial/x", "sub//x"])
def test_names_that_could_leave_the_destination_are_refused(tmp_path, name):
    dest = tmp_path / "dest"
    script = sender(dirs=[["sub", 0o755, 0]], files=[file_entry(name, b"owned\n")])
    with pytest.raises(xfer.XferError) as info:
        receive_from(script, dest)
    assert info.value.code == "unsafe"
    assert not (tmp_path / "escaped").exists()
    assert not any(p.is_file() for p in dest.rglob("*")), "nothing may be written"


def test_a_file_in_an_unlisted_directory_is_refused(tmp_path):
    script = sender(files=[file_entry("nodir/x", b"x")])
    with pytest.raises(xfer.XferError, match="without its parent"):
        receive_from(script, tmp_path / "dest")


def test_symlinks_are_made_only_when_they_stay_inside(tmp_path):
    dest = tmp_path / "dest"
    links = [["ok", "sub/f"], ["abs", "/etc/passwd"], ["up", "../outside"],
             ["sub/up2", "../../x"], ["sub/side", "../ok"]]
    tally = receive_from(sender(dirs=[["sub", 0o755, 0]], files=[file_entry("sub/f", b"f\n")],
                                links=links), dest)
    assert os.readlink(dest / "ok") == "sub/f" and (dest / "ok").read_text() == "f\n"
    assert os.readlink(dest / "sub" / "side") == "../ok"
    for refused in ("abs", "up", "sub/up2"):
        assert not os.path.lexists(dest / refused), refused
    assert sorted(tally.skipped) == ["abs", "sub/up2", "up"]


def test_symlinks_already_in_the_destination_are_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep me\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)  # where the sender has a directory
    (dest / "f").symlink_to(outside / "victim")  # where the sender has a file
    (dest / xfer.PARTIAL_DIR).symlink_to(outside)  # where partial files go
    receive_from(sender(dirs=[["sub", 0o755, 0]],
                        files=[file_entry("sub/new", b"new\n"), file_entry("f", b"mine\n")]),
                 dest)
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_text() == "keep me\n"
    assert (dest / "sub").is_dir() and not (dest / "sub").is_symlink()
    assert (dest / "sub" / "new").read_text() == "new\n"
    assert not (dest / "f").is_symlink() and (dest / "f").read_text() == "mine\n"


def test_setuid_bits_are_dropped(tmp_path):
    entry = ["tool", 3, 1_700_000_000_000_000_000, 0o6755, b"#!\n"]
    receive_from(sender(files=[entry]), tmp_path / "dest")
    assert (tmp_path / "dest" / "tool").stat().st_mode & 0o7777 == 0o755


def test_a_file_that_was_not_asked_for_is_a_protocol_error(tmp_path):
    def body(far, want):
        far.send(b"F", xfer._FILE.pack(7, 0))
        far.flush()

    script = sender(files=[file_entry("a", b"a")], body=body)
    with pytest.raises(xfer.XferError, match="not asked for"):
        receive_from(script, tmp_path / "dest")


def test_an_oversized_frame_is_refused_before_it_is_read(tmp_path):
    def body(far, want):
        far.writer.write(xfer._HEADER.pack(b"D", 1 << 30))
        far.flush()

    with pytest.raises(xfer.XferError, match="larger than any"):
        receive_from(sender(files=[file_entry("a", b"a")], body=body), tmp_path / "dest")


def test_a_cut_file_never_carries_its_name_and_the_next_attempt_resumes(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(3 * xfer.CHUNK + 123)
    (src / "big.bin").write_bytes(data)
    st = (src / "big.bin").stat()
    entry = ["big.bin", len(data), st.st_mtime_ns, 0o644, data]
    dest = tmp_path / "dest"

    def half(far, want):
        [[i, offset]] = want
        far.send(b"F", xfer._FILE.pack(i, offset))
        far.send(b"D", data[: xfer.CHUNK])
        far.send(b"D", data[xfer.CHUNK : 2 * xfer.CHUNK])
        far.flush()  # ... and the link dies

    with pytest.raises(EOFError):
        receive_from(sender(files=[entry], body=half), dest)
    assert not (dest / "big.bin").exists(), "a half file must not carry the real name"
    partials = list((dest / xfer.PARTIAL_DIR).iterdir())
    assert [p.stat().st_size for p in partials] == [2 * xfer.CHUNK]

    # The real sender, next attempt: only the missing third travels.
    peer = Peer()
    sent = xfer.Tally()
    thread = threading.Thread(target=xfer.send, args=(peer.far, str(src), sent), daemon=True)
    thread.start()
    got = xfer.Tally()
    xfer.receive(peer.near, str(dest), got)
    thread.join(10)
    peer.close()
    assert (dest / "big.bin").read_bytes() == data
    assert (dest / "big.bin").stat().st_mtime_ns == st.st_mtime_ns
    assert peer.far.sent < xfer.CHUNK + 200 + 4096  # LIST, one chunk and a bit, frames
    assert not (dest / xfer.PARTIAL_DIR).exists()


def test_a_partial_of_another_version_is_not_resumed(tmp_path):
    dest = tmp_path / "dest"
    old = file_entry("f", b"old old old old", mtime_ns=1_600_000_000_000_000_000)

    def cut(far, want):
        [[i, offset]] = want
        far.send(b"F", xfer._FILE.pack(i, offset))
        far.send(b"D", b"old old")
        far.flush()

    with pytest.raises(EOFError):
        receive_from(sender(files=[old], body=cut), dest)
    asked = []

    def record(far, want):
        asked.extend(want)
        i, offset = want[0]
        far.send(b"F", xfer._FILE.pack(i, offset))
        far.send(b"D", new[4][offset:])
        far.send(b"E", xfer._END.pack(len(new[4]), new[2]))
        far.send_json({"op": "fin", "problems": []})
        far.flush()
        far.recv_json("done")

    new = file_entry("f", b"new new new new", mtime_ns=1_700_000_000_000_000_000)
    receive_from(sender(files=[new], body=record), dest)
    assert asked == [[0, 0]], "a partial of the old version must not be the new one's prefix"
    assert (dest / "f").read_bytes() == b"new new new new"


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
