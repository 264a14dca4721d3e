"""A box that answers garbage (issue 28): every verb that reads the box, run as the real CLI in
a child process under a memory limit, against a local box whose state.json, log and probe
answers are hostile. Whatever it sends: no traceback, no terminal escape on stdout or stderr
(the job's own log keeps its colours, SGR, and nothing else), memory bounded, and garbage is
one line naming the verb and the box, exit 2."""

from __future__ import annotations

import json
import re
import resource
import subprocess
from pathlib import Path

import pytest
from garbagebox import GarbageBox, deep_json, rgt_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rgt.textsafe import LogFilter, log_text, terminal_text

MEMORY_LIMIT = 1536 * 1024 * 1024  # address space (not RSS): the interpreter maps ~600 MB
SGR = re.compile(rb"\x1b\[[0-9;:]*m")
C1 = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080-U+009F in UTF-8: 8-bit CSI, OSC, ST ...

# The sequences a hostile box would send: clipboard (OSC 52), hyperlink (OSC 8), title
# (OSC 0/2), screen and line erase, cursor moves, DCS, 8-bit CSI/OSC, a bidi override.
ESCAPES = [
    "\x1b]52;c;cm0gLXJmIH4K\x07", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "\x1b]0;rgt: verified\x07", "\x1b]2;title\x1b\\", "\x1b[2J", "\x1b[1A\x1b[2K✓ verified",
    "\x1b[10;1H", "\x1bP+q544e\x1b\\", "\x9b2J", "\x9d52;c;eA==\x9c", "\u202eevil", "\x1bc",
    "\x1b[31mred\x1b[0m", "\r", "\x00", "\x7f", "\x1b", "\x1b]52;c;unterminated"]
GARBAGE_TEXT = st.lists(st.one_of(st.sampled_from(ESCAPES), st.text(max_size=8)),
                        max_size=6).map("".join)
# Values of the wrong type for a field that should be text or a number.
WRONG = st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.booleans(),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> GarbageBox:
    return GarbageBox.make(tmp_path_factory.mktemp("garbage"))


def run_cli(box: GarbageBox, verb: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(box.argv(verb), env=rgt_env(box.home), input=stdin,
                          capture_output=True, timeout=120, cwd=box.root,
                          preexec_fn=limit_memory)


def assert_clean(done: subprocess.CompletedProcess, verb: str) -> None:
    said = done.stdout + done.stderr
    assert b"Traceback" not in said and b"MemoryError" not in said, said[-3000:]
    if verb in ("logs", "follow"):  # the job's own log: colours may stay, nothing else
        said = SGR.sub(b"", done.stdout) + done.stderr
    assert b"\x1b" not in said and not C1.search(said), said[-3000:]
    if done.returncode == 2 and b"rgt pull" not in done.stderr[:12]:
        assert len(done.stderr.decode().strip().splitlines()) >= 1


# ----------------------------------------------------------------------------- the sanitiser


def test_terminal_text_shows_every_control_character_escaped():
    shown = terminal_text("a\x1b]52;c;eA==\x07b\x9b2J\u202ec\nd\te")
    assert shown == "a\\x1b]52;c;eA==\\x07b\\x9b2J\\u202ec\\x0ad\\x09e"
    assert terminal_text("x\n\ty\r", lines=True) == "x\n\ty\\x0d"
    assert terminal_text("plain ✓ text") == "plain ✓ text"


def test_the_log_keeps_colours_and_carriage_returns_only():
    log = ("\x1b[31mred\x1b[0m 10%\r 20%\x1b]52;c;eA==\x07\x1b]8;;http://x\x1b\\link"
           "\x1b]8;;\x1b\\\x1b[2J\x1b[1;1H\x1b]0;title\x07\x9b2J\x00\x07 done\n")
    assert log_text(log) == "\x1b[31mred\x1b[0m 10%\r 20%link done\n"


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.one_of(st.sampled_from(ESCAPES), st.text(max_size=10)),
                       max_size=12),
       cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20))
def test_a_log_cut_anywhere_filters_as_when_whole(pieces, cuts):
    """`watch --follow` gets the log in pieces: a sequence cut between two polls is held
    back, never printed half (which would let its tail through as text, or its head raw)."""
    text = "".join(pieces)
    stream, at, i = LogFilter(), 0, 0
    out = []
    while at < len(text):
        step = cuts[i % len(cuts)]
        out.append(stream.feed(text[at:at + step]))
        at, i = at + step, i + 1
    out.append(stream.feed("", final=True))
    joined = "".join(out)
    assert joined == log_text(text)
    assert "\x1b" not in SGR.sub(b"", joined.encode()).decode()


# ----------------------------------------------------------------------------- the CLI


def state_with(box: GarbageBox, **fields) -> bytes:
    state = json.loads(box.pristine["state.json"])
    sync = state.get("sync") or {}
    if "sync_error" in fields:
        sync["error"] = fields.pop("sync_error")
    state.update(fields, sync=sync)
    return json.dumps(state).encode()


ANSWERS = st.one_of(
    # state.json (read by the real probe on the box) with escapes in its text fields
    st.builds(lambda s, e, r: ("state", {"signal": s, "sync_error": e, "error": r}),
              GARBAGE_TEXT, GARBAGE_TEXT, GARBAGE_TEXT),
    # state.json with fields of the wrong type, or not JSON at all
    st.builds(lambda f, v: ("state", {f: v}),
              st.sampled_from(["signal", "status", "exit_code", "sync", "restarts", "ended"]),
              WRONG),
    st.sampled_from([("state-raw", b"\xff\xfe not json"), ("state-raw", deep_json(100_000)),
                     ("state-raw", b'{"status": "running", "error": "' + b"x" * (5 << 20)
                      + b'"}')]),
    # the interpreter lies: the probe's answer itself
    st.sampled_from([("probe", deep_json(200_000)), ("probe", b"\xff\xfe\x1b]52;c;eA==\x07"),
                     ("probe", b"[]"), ("probe", b'{"state": "x", "verdict": [1]}'),
                     ("probe", b'{"log": {"tail": "x\\u001b]52;c;eA==\\u0007"}}'),
                     ("probe", b'{"state": {"status": "running"}, "disks": [{"path": 1}]}'),
                     ("probe", b'"' + b"y" * (5 << 20) + b'"')]),
    # the job's log: escapes, invalid UTF-8, a long line without a newline
    st.builds(lambda t, junk: ("log", t.encode("utf-8", "surrogatepass") + junk),
              GARBAGE_TEXT, st.sampled_from([b"", b"\xff\xfe\xc3", b"\r" * 300_000])),
)
VERBS = st.sampled_from(["watch", "json", "logs", "follow", "pull", "runs", "top", "plan"])


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(answer=ANSWERS, verb=VERBS)
def test_garbage_from_the_box_is_one_line_never_a_crash_or_an_escape(box, answer, verb):
    box.restore()
    kind, value = answer
    if kind == "state":
        (box.run_dir / "state.json").write_bytes(state_with(box, **value))
    elif kind == "state-raw":
        (box.run_dir / "state.json").write_bytes(value)
    elif kind == "probe":
        box.lie(probe=value)
    else:
        (box.run_dir / "log").write_bytes(value)
    done = run_cli(box, verb)
    assert_clean(done, verb)
    if kind == "probe" and verb in ("watch", "pull") and value != b"[]":
        assert done.returncode == 2, done.stderr
        line = done.stderr.decode().strip()
        assert line.startswith(f"error: rgt {verb}: box box: the on-box probe"), line
        assert "\n" not in line


def test_an_escape_in_a_pulled_name_is_shown_escaped(box, tmp_path):
    """The ✓ lines of `pull` and the listing of `rgt ckpt ls` print names the box chose."""
    box.restore()
    home = box.home / "boxes" / "box" / "durable" / "rgt" / "ckpt"
    evil = next(p for p in home.parent.rglob("checkpoint-5") if p.is_dir())
    named = evil.with_name("checkpoint-7\x1b]52;c;eA==\x07")
    named.mkdir()
    (named / "model.safetensors").write_bytes((evil / "model.safetensors").read_bytes())
    try:
        pulled = run_cli(box, "pull")
        assert_clean(pulled, "pull")
        listed = run_cli(box, "ckpt")
        assert_clean(listed, "ckpt")
        assert b"\\x1b]52" in pulled.stdout + pulled.stderr + listed.stdout
    finally:
        for child in named.iterdir():
            child.unlink()
        named.rmdir()


def test_a_deep_answer_still_lets_the_box_go_down_with_discard(tmp_path):
    """Item 3: before, `down --discard-results` raised RecursionError on this probe answer."""
    box = GarbageBox.make(tmp_path / "deep")
    box.lie(probe=deep_json(200_000))
    refused = run_cli(box, "down")
    assert_clean(refused, "down")
    assert refused.returncode == 3, refused.stdout + refused.stderr  # the Iron Law's refusal
    lines = refused.stderr.splitlines()  # the refusal's table: heading, rows, answer, ways out
    assert lines[0].startswith(b"error: refusing to stop box") and any(
        line.startswith(b"the box's answer: box box: the on-box probe answered JSON nested "
                        b"deeper") for line in lines), refused.stderr
    gone = run_cli(box, "discard", b"box\n")
    assert_clean(gone, "discard")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert b"box is down" in gone.stdout


def test_invalid_utf8_in_the_log_does_not_cost_follow_its_place(box):
    """Item 5: --follow counted re-encoded characters, so text after invalid UTF-8 was
    skipped (each bad byte became a 3-byte U+FFFD in its count)."""
    box.restore()
    (box.run_dir / "log").write_bytes(b"start \xff\xfe\xfd\xfc middle " + b"\xe2\x9c" * 4
                                      + b" end-of-log\n")
    done = run_cli(box, "follow")
    assert_clean(done, "follow")
    assert b"end-of-log" in done.stdout, done.stdout
    raw = subprocess.run([*box.argv("logs"), "--raw"], env=rgt_env(box.home),
                         capture_output=True, timeout=60)
    assert raw.stdout.endswith(b"\xe2\x9c" * 4 + b" end-of-log\n")


def test_a_long_log_line_is_cut_with_a_marker(box):
    box.restore()
    (box.run_dir / "log").write_bytes(b"x" * 200_000 + b"\rtail-of-bar\n")
    done = run_cli(box, "logs")
    assert_clean(done, "logs")
    text = done.stdout.decode()
    assert text.startswith("[rgt: ") and "characters of this line cut]" in text
    assert text.rstrip().endswith("tail-of-bar") and len(text) < 70_000


@pytest.mark.parametrize("path", ["state.json"])
def test_the_harness_restores_an_honest_box(box, path):
    """The property test's examples start from the box the job left: watch reads it."""
    box.restore()
    done = run_cli(box, "watch")
    assert done.returncode == 0 and b"succeeded" in done.stdout, done.stdout + done.stderr
    assert Path(box.run_dir / path).read_bytes() == box.pristine[path]


def test_a_stalled_sender_is_said_with_its_wait():
    """Item 5: a log read that connected but sent nothing (CommandTimeout after STALL_S) was
    30 s of silence, then the generic 'does not answer'; now one line says what is happening
    and when rgt asks again, and the give-up still applies."""
    from types import SimpleNamespace

    from rgt.lifecycle.watch import BoxUnreachable, Silence

    said: list[str] = []
    silence = Silence(SimpleNamespace(name="b"), 1.5, 25, said.append)
    assert silence.stalled() == 3.0
    assert said == ["no bytes from the box for 10 s, waiting (retry in 3 s)"]
    silence.since -= 20  # 30 s without a byte: past the 25 s give-up
    with pytest.raises(BoxUnreachable, match="no bytes for 30 s"):
        silence.stalled()


def test_follow_timeout_on_an_ended_run_with_a_long_log_says_so(box):
    """--follow reads the log a budget (8 MiB) per poll: when --timeout passes while an
    ended run's log is still streaming, it said 'still succeeded …; it keeps running'."""
    box.restore()
    (box.run_dir / "log").write_bytes((b"x" * 1023 + b"\n") * (24 * 1024))  # 24 MiB
    argv = box.argv("follow")
    argv[argv.index("--timeout") + 1] = "0"
    done = subprocess.run(argv, env=rgt_env(box.home), capture_output=True, timeout=60)
    assert_clean(done, "follow")
    assert done.returncode == 0, done.stderr
    assert b"--timeout 0 s passed while the ended run's log was still streaming" in \
        done.stderr and b"keeps running" not in done.stderr
    assert 0 < len(done.stdout) < 24 * 1024 * 1024


def test_the_capped_read_stops_at_its_limit_and_names_a_stall():
    """The transports' bounded capture, on real processes: past `limit` the command is ended
    (not read to its end: `yes` never ends), and `idle` seconds without a byte is `Stalled`,
    while a slow sender that keeps sending is not."""
    from rgt.transport import LocalTransport
    from rgt.transport.base import Stalled

    local = LocalTransport()
    endless = local.run("yes", limit=1 << 20, timeout=30)
    assert endless.truncated and len(endless.data) == 1 << 20
    assert local.run("printf 'a\\xffb'", limit=10).data == b"a\xffb"
    with pytest.raises(Stalled, match="sent no bytes for 1s"):
        local.run("echo first; sleep 5; echo late", limit=100, idle=1, timeout=30)
    slow = local.run("for i in 1 2 3; do echo $i; sleep 0.6; done", limit=100, idle=1)
    assert slow.data == b"1\n2\n3\n" and not slow.truncated


def test_the_capped_read_over_ssh_ends_the_command_and_keeps_the_connection(sshd_server):
    """Over a real sshd: `yes` is cut at the limit (the ssh client's group is ended), the
    bytes come as they were sent, and the next command on the same master still runs."""
    from rgt.transport import SshTransport
    from rgt.transport.base import Stalled

    ssh = SshTransport(sshd_server.target, known_hosts=sshd_server.known_hosts)
    try:
        endless = ssh.run("yes", limit=1 << 20, timeout=60)
        assert endless.truncated and len(endless.data) == 1 << 20
        assert ssh.run("printf 'a\\xffb'", limit=10).data == b"a\xffb"
        with pytest.raises(Stalled):
            ssh.run("sleep 5", limit=10, idle=1, timeout=60)
        assert ssh.run("echo still here").stdout == "still here\n"
    finally:
        ssh.close()
