"""A box that attacks the pull (issue 11): the job on the box plays the attacker and plants the
hostile files; the real CLI pulls them. Nothing outside the pull directory may be written or
followed, and the laptop, not the box, decides what a complete pull is."""

from __future__ import annotations

import os
from pathlib import Path

from boxkit import write_job

# The job plants, in the durable dir its outputs are copied to (what pull fetches): a link
# that lexically stays inside but really leads one level above the pull directory (sub/l is
# the root, esc = root/..), and
# rgt's evidence and log names pointing through it at the canary beside the pull directory.
PLANT = (
    "mkdir -p out && echo weights > out/w.bin && D=$RGT_OUT_DIR && mkdir -p $D/sub && "
    "ln -s .. $D/sub/l && ln -s sub/l/.. $D/esc && "
    "ln -s esc/canary $D/PULL_VERIFIED.json && ln -s esc/canary $D/.PULL_VERIFIED.json.tmp && "
    "ln -s esc $D/logs && ln -s loop2 $D/loop1 && ln -s loop1 $D/loop2 && "
    "ln -s /etc/passwd $D/abs"
)


def up_and_run(cli, tmp_path: Path, **fields) -> str:
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", **fields)
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    return run_id


def outside_snapshot(root: Path, dest: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and dest not in p.parents
            and "rgt-home" not in p.parts}


def escaping_links(dest: Path) -> list[str]:
    top = os.path.realpath(dest)
    return [str(p) for p in dest.rglob("*") if p.is_symlink()
            and not (os.path.realpath(p) + os.sep).startswith(top + os.sep)]


def test_planted_links_never_write_or_lead_outside_the_pull(cli, tmp_path):
    """Items 1 and 2: before, the evidence writer followed `.PULL_VERIFIED.json.tmp` to the
    canary beside the pull directory, and the pulled tree kept `esc` (a way out)."""
    canary = tmp_path / "canary"
    canary.write_text("laptop file\n")
    run_id = up_and_run(cli, tmp_path, run=PLANT, outputs=["out"])
    dest = tmp_path / "results"
    before = outside_snapshot(tmp_path, dest)
    pulled = cli("pull", "box", run_id, "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert canary.read_text() == "laptop file\n"
    assert outside_snapshot(tmp_path, dest) == before, "a file outside the pull changed"
    assert escaping_links(dest) == []
    assert "esc -> sub/l/..: leads outside the pull directory; removed" in pulled.stderr
    assert (dest / "logs").is_dir() and not (dest / "logs").is_symlink()
    assert (dest / "logs" / f"{run_id}.log").read_text().startswith("")
    report = cli.verified("box", run_id)
    assert report["ok"] and (dest / "out" / "w.bin").read_text() == "weights\n"
    assert not (dest / "PULL_VERIFIED.json").exists()  # the evidence lives in RGT_HOME
    cli.ok("down", "box", "--yes")


def test_a_run_that_declares_nothing_pulls_its_log_and_goes_down(cli, tmp_path):
    """Item 12: before, the manifest script got no pattern, exited 1, and pull never verified,
    so the box could only go down with --discard-results."""
    run_id = up_and_run(cli, tmp_path, run="echo the-result-is 42")
    dest = tmp_path / "results"
    pulled = cli("pull", "box", run_id, "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert "the-result-is 42" in (dest / "logs" / f"{run_id}.log").read_text()
    report = cli.verified("box", run_id)
    assert report["ok"] and report["exit_code"] == 0 and report["run_status"] == "succeeded"
    cli.ok("down", "box", "--yes")


def test_outputs_that_match_nothing_say_so(cli, tmp_path):
    """Item 12: before, the message blamed free space and inodes (AD4/U7)."""
    run_id = up_and_run(cli, tmp_path, run="echo done", outputs=["model.pt"])
    pulled = cli("pull", "box", run_id, "--dest", str(tmp_path / "results"))
    assert pulled.returncode == 1
    assert "declared outputs matched nothing" in pulled.stderr and "model.pt" in pulled.stderr
    assert "free space" not in pulled.stderr and "Traceback" not in pulled.stderr
    assert cli("down", "box", "--yes").returncode == 3  # the run's outputs never existed


def test_an_absolute_latest_link_in_the_checkpoint_home_still_verifies(cli, tmp_path):
    """Item 8: before, the manifest hashed through `latest`, the transfer (rightly) did not
    copy an absolute link, and pull failed with 'listed on the box, missing here'."""
    run = ('mkdir -p "$RGT_CKPT_DIR" && echo step5 > "$RGT_CKPT_DIR/ckpt-5.bin" && '
           'ln -s "$RGT_CKPT_DIR/ckpt-5.bin" "$RGT_CKPT_DIR/latest"')
    run_id = up_and_run(cli, tmp_path, run=run, checkpoint_dir="$RGT_CKPT_DIR")
    dest = tmp_path / "results"
    pulled = cli("pull", "box", run_id, "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert (dest / "ckpt" / "ckpt-5.bin").read_text() == "step5\n"
    assert "ckpt/latest: a symlink on the box" in pulled.stdout
    assert escaping_links(dest) == []


def test_planted_links_over_ssh(cli, sshd_server, tmp_path):
    """Items 1 and 2 over a real sshd box."""
    canary = tmp_path / "canary"
    canary.write_text("laptop file\n")
    target = sshd_server.target
    cli.ok("up", "far", "--profile", "generic-ssh", "--ssh",
           f"ssh -p {target.port} -i {target.identity} root@127.0.0.1",
           "--data-dir", str(tmp_path / "far-data"), "--durable-dir", str(tmp_path / "far-data"))
    spec = write_job(tmp_path / "job", run=PLANT, outputs=["out"])
    run_id = cli.ok("run", "far", str(spec)).stdout.strip().splitlines()[-1]
    cli("watch", "far", run_id, "--until-done", "--timeout", "90")
    dest = tmp_path / "results"
    before = outside_snapshot(tmp_path, dest)
    pulled = cli("pull", "far", run_id, "--dest", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert canary.read_text() == "laptop file\n"
    assert {k: v for k, v in outside_snapshot(tmp_path, dest).items()
            if "far-data" not in k} == {k: v for k, v in before.items() if "far-data" not in k}
    assert escaping_links(dest) == []
