"""The lifecycle against a real sshd on 127.0.0.1: connection strings, aliases, host keys,
dropped connections."""

from __future__ import annotations

import json

from boxkit import up_ssh, write_job

JOB = (
    "for i in $(seq 1 6); do echo step=$i loss=0.$i; sleep 0.5; done\n"
    "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json"
)


def test_up_audit_run_watch_pull_down_over_ssh(cli, sshd_server, tmp_path):
    first = up_ssh(cli, sshd_server, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "First generic-ssh box" in first.stdout  # principle 10: danger clocks on first contact
    assert (cli.home / "known_hosts").read_text().strip(), "host key recorded on first contact"
    audit = cli("audit", "gpu")
    assert "inodes" in audit.stdout and "AD4/U7" in audit.stdout
    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    run_id = cli.ok("run", "gpu", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "gpu", run_id, "--until-done", "--timeout", "90")
    assert "step=6" in cli.ok("logs", "gpu", "--tail", "3").stdout
    assert cli("down", "gpu", "--yes").returncode == 3
    dest = tmp_path / "pulled"
    cli.ok("pull", "gpu", "--dest", str(dest))
    assert json.loads((dest / "out" / "metrics.json").read_text()) == {"acc": 0.9}
    down = cli("down", "gpu", input="gpu\n")
    assert down.returncode == 0, down.stderr
    assert "do this in the console" in down.stdout  # no API: rgt says the exact step
    assert (tmp_path / "box-data").is_dir(), "rgt has no API here: it must not delete the box"
    assert "$" in cli.ok("ls", "--all").stdout


def test_ssh_config_alias(cli, sshd_server, tmp_path):
    config = sshd_server.write_ssh_config("my-gpu-alias")
    result = cli("up", "alias-box", "--profile", "generic-ssh", "--host", "my-gpu-alias",
                 "--ssh-config", str(config), "--data-dir", str(tmp_path / "d"),
                 "--durable-dir", str(tmp_path / "u"))
    assert result.returncode == 0, result.stderr
    assert "answers: Linux" in result.stdout


def test_changed_host_key_is_refused(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path).returncode == 0
    sshd_server.regenerate_host_key()
    result = cli("audit", "gpu")
    assert result.returncode == 2
    assert "host key" in result.stderr.lower() and "Traceback" not in result.stderr


def test_job_survives_a_dropped_connection_and_watch_reconnects(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path).returncode == 0
    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    run_id = cli.ok("run", "gpu", str(spec)).stdout.strip().splitlines()[-1]
    sshd_server.kill()  # every connection drops, including rgt's control master
    unreachable = cli("watch", "gpu", run_id)
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr
    sshd_server.start()
    watched = cli("watch", "gpu", run_id, "--until-done", "--timeout", "90")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "succeeded" in watched.stdout


def test_bad_connection_strings_are_clear(cli, tmp_path):
    for args in (["--ssh", "telnet box"], ["--ssh", "ssh -p notaport root@h"],
                 ["--profile", "generic-ssh"], ["--ssh", "ssh root@h", "--host", "h"]):
        result = cli("up", "x", "--profile", "generic-ssh", *args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr and result.stderr.startswith("error:"), args


def test_a_box_that_no_longer_answers_can_still_be_marked_down(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path).returncode == 0
    assert up_ssh(cli, sshd_server, tmp_path, "gpu2").returncode == 0
    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    pulled = cli.ok("run", "gpu", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "gpu", pulled, "--until-done", "--timeout", "90")
    cli.ok("pull", "gpu", "--dest", str(tmp_path / "pulled"))
    unpulled = cli.ok("run", "gpu2", str(spec)).stdout.strip().splitlines()[-1]
    cli.ok("watch", "gpu2", unpulled, "--until-done", "--timeout", "90")
    sshd_server.stop()  # the box was destroyed in the console, say

    waiting = cli("down", "gpu", "--yes")  # rgt stops no meter here: --yes is not your word
    assert waiting.returncode == 4 and "gpu is not down" in waiting.stdout, waiting.stderr
    done = cli("down", "gpu", input="gpu\n")  # evidence taken after the run ended counts
    assert done.returncode == 0, done.stderr
    assert "without reaching it" in done.stdout

    refused = cli("down", "gpu2", "--yes")  # never pulled: the Iron Law holds
    assert refused.returncode == 3 and "never pulled" in refused.stderr
    given_up = cli("down", "gpu2", "--discard-results", input="gpu2\n")
    assert given_up.returncode == 0, given_up.stderr


def test_watch_on_a_box_that_stops_answering_backs_off_and_gives_up(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path).returncode == 0
    spec = write_job(tmp_path / "job", run="sleep 120")
    run_id = cli.ok("run", "gpu", str(spec)).stdout.strip().splitlines()[-1]
    sshd_server.stop()  # the box's network is gone: every connection is refused
    watched = cli("watch", "gpu", run_id, "--until-done", "--give-up-after", "4", timeout=120)
    assert watched.returncode == 6, watched.stdout + watched.stderr
    assert "does not answer" in watched.stderr and "asking again in" in watched.stderr
    assert "has not answered for" in watched.stderr and "Traceback" not in watched.stderr
