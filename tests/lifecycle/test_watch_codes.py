"""`watch --until-done` says how the run ended in its exit code (documented in --help and the
README): 0 succeeded, 1 failed, 4 still running at --timeout, 5 not found, 7 cancelled; and
`watch` of a box that is down prints the last status instead of a traceback."""

from __future__ import annotations

from boxkit import write_job


def _run(cli, tmp_path, name: str, command: str) -> str:
    spec = write_job(tmp_path / name, name=name, run=command)
    return cli.ok("run", "box", str(spec)).stdout.split()[-1]


def test_until_done_exit_codes(cli, tmp_path):
    cli.ok("up", "box")
    ok = _run(cli, tmp_path, "ok", "echo fine")
    bad = _run(cli, tmp_path, "bad", "exit 3")
    slow = _run(cli, tmp_path, "slow", "sleep 120")
    assert cli("watch", "box", ok, "--until-done", "--timeout", "60").returncode == 0
    assert cli("watch", "box", bad, "--until-done", "--timeout", "60").returncode == 1

    still = cli("watch", "box", slow, "--until-done", "--timeout", "1")
    assert still.returncode == 4, still.stdout + still.stderr
    assert "still running" in still.stderr and "Traceback" not in still.stderr

    for args in (("nobox", "--until-done"), ("box", "no-such-run", "--until-done"),
                 ("box", "no-such-run", "--follow")):
        missing = cli("watch", *args)
        assert missing.returncode == 5, (args, missing.stderr)
        assert len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr
    assert cli("watch", "nobox").returncode == 2  # without waiting: a usage error as elsewhere

    cli.ok("cancel", "box", slow, "--yes", "--grace", "5")
    cancelled = cli("watch", "box", slow, "--until-done", "--timeout", "60")
    assert cancelled.returncode == 7 and "cancelled" in cancelled.stdout

    help_text = cli.ok("watch", "--help").stdout
    assert "4 still running" in help_text and "7 cancelled" in help_text


def test_watch_on_a_down_box_shows_the_last_status(cli, tmp_path):
    cli.ok("up", "box")
    run_id = _run(cli, tmp_path, "ok", "echo fine")
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    cli.ok("down", "box", "--discard-results", input="box\n")
    shown = cli("watch", "box", run_id)
    assert "Traceback" not in shown.stderr and shown.returncode == 0, shown.stderr
    assert "succeeded" in shown.stdout and "is down" in shown.stdout


def test_logs_tail_zero_and_beyond_the_log(cli, tmp_path):
    cli.ok("up", "box")
    run_id = _run(cli, tmp_path, "ok", "echo one; echo two")
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert cli.ok("logs", "box", "-n", "0").stdout == ""
    whole = cli.ok("logs", "box").stdout
    assert cli.ok("logs", "box", "-n", "100000").stdout == whole and "two" in whole
    negative = cli("logs", "box", "-n", "-1")
    assert negative.returncode == 2 and "Traceback" not in negative.stderr
