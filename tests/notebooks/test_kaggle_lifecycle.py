"""Kaggle through rgt's command line, the official client (kaggle 2.2.4) against fake_kaggle.py:
up checks the credentials → run pushes attempt 1 → watch polls it; the attempt reaches its
session budget and watch pushes attempt 2 mounting its output (kernel_sources) → it resumes
and succeeds → pull verifies → down names what stays in the account. Bad input: one line,
exit 2, for Colab and Kaggle alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli import rgt
from fake_kaggle import FakeKaggle, client_env

from rgt.examples import train_mlp

torch = pytest.importorskip("torch")
pytest.importorskip("kaggle")
STEPS = 40
# one attempt's budget: the job (torch's import takes seconds on a loaded machine) must save a
# checkpoint (every 5 steps) inside it, and must not finish its STEPS * SLEEP_S = 20 s in it
BUDGET_S, SLEEP_S = 15, 0.5


def write_job(tmp: Path, run: str, name: str = "job.yaml", **extra) -> Path:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    (work / "train_mlp.py").write_bytes(Path(train_mlp.__file__).read_bytes())
    spec = {"name": "mlp", "workdir": str(work), "run": run, "outputs": ["out"],
            "checkpoint_dir": "$RGT_CKPT_DIR", **extra}
    path = tmp / name
    path.write_text(yaml.safe_dump(spec))
    return path


def train(steps: int, sleep: float) -> str:
    return (f"{sys.executable} train_mlp.py --steps {steps} --save-every 5 --sleep {sleep} "
            '--ckpt-dir "$RGT_CKPT_DIR" --out out')


def one_line_exit_2(done: subprocess.CompletedProcess, *words: str) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    text = " ".join(" ".join(lines).split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(lines) <= 3, done.stderr  # one wrapped line
    for word in words:
        assert word in text, text
    return text


def test_kaggle_up_run_continues_a_capped_attempt_then_pull_and_down(tmp_path):
    job = write_job(tmp_path, train(STEPS, SLEEP_S),
                    env={"RGT_KAGGLE_BUDGET_S": str(BUDGET_S), "RGT_KAGGLE_GRACE_S": "20"})
    with FakeKaggle(tmp_path / "kaggle") as fake:
        env = {**client_env(fake, tmp_path), "RGT_HOME": str(tmp_path / "home")}
        up = rgt("up", "k1", "--profile", "kaggle", env=env)
        assert up.returncode == 0, up.stderr
        assert "Kaggle API as alice" in up.stdout

        started = rgt("run", "k1", str(job), "-d", env=env)
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip().splitlines()[-1]
        assert "pushed private kernel alice/rgt-mlp" in " ".join(started.stdout.split())

        done = rgt("watch", "k1", run_id, "--until-done", "--timeout", "150", "--json",
                   env=env, timeout=200)
        assert done.returncode == 0, done.stdout + done.stderr
        summary = json.loads(done.stdout)["run"]
        assert summary["status"] == "succeeded", summary
        second = fake.kernels["rgt-mlp-a2"]["versions"][0]
        assert second["kernel_sources"] == ["alice/rgt-mlp"]  # it mounted attempt 1's output

        log = rgt("logs", "k1", run_id, env=env).stdout
        assert "attempt 1: kernel alice/rgt-mlp" in log and "attempt 2: kernel alice/rgt-mlp-a2" \
            in log and "resumed step=" in log, log[-2000:]

        pulled = rgt("pull", "k1", run_id, "--dest", str(tmp_path / "pulled"), "--json", env=env)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        report = json.loads(pulled.stdout)["pull"]
        assert report["ok"] and report["run_status"] == "succeeded", report

        listed = json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]
        assert any(r["what"].startswith("Kaggle GPU quota: ") for r in listed["at_risk"])

        down = rgt("down", "k1", "--yes", env=env)
        assert down.returncode == 0, down.stdout + down.stderr
        said = " ".join(down.stdout.split())
        assert "Kaggle bills nothing" in said and "alice/rgt-mlp-a2" in said, said

    ref = tmp_path / "ref"
    subprocess.run([sys.executable, train_mlp.__file__, "--steps", str(STEPS), "--save-every",
                    "5", "--ckpt-dir", str(ref / "ckpt"), "--out", str(ref / "out")],
                   check=True, capture_output=True, timeout=120)
    got = torch.load(tmp_path / "pulled" / "out" / "final.pt", weights_only=True)
    want = torch.load(ref / "out" / "final.pt", weights_only=True)
    assert all(torch.equal(got["model"][k], want["model"][k]) for k in want["model"])


def test_a_new_run_of_the_job_resumes_from_the_last_runs_checkpoints(tmp_path):
    """`rgt run` says "resuming" when the job's checkpoint home holds checkpoints; on Kaggle
    the new run's kernel sees them only by mounting the kernel that wrote them."""
    capped = write_job(tmp_path, train(STEPS, SLEEP_S), env={
        "RGT_KAGGLE_BUDGET_S": str(BUDGET_S), "RGT_KAGGLE_GRACE_S": "20",
        "RGT_KAGGLE_MAX_ATTEMPTS": "1"})
    with FakeKaggle(tmp_path / "kaggle") as fake:
        env = {**client_env(fake, tmp_path), "RGT_HOME": str(tmp_path / "home")}
        assert rgt("up", "k1", "--profile", "kaggle", env=env).returncode == 0
        first = rgt("run", "k1", str(capped), "-d", env=env).stdout.strip().splitlines()[-1]
        ended = rgt("watch", "k1", first, "--until-done", "--timeout", "150", "--json",
                    env=env, timeout=200)
        summary = json.loads(ended.stdout)["run"]
        assert summary["status"] == "preempted" and "1 attempts used" in " ".join(
            summary["causes"]), summary  # capped, and not continued within the run

        again = write_job(tmp_path, train(STEPS, 0.01), "again.yaml")
        started = rgt("run", "k1", str(again), "-d", env=env)
        said = " ".join(started.stdout.split())
        assert started.returncode == 0, started.stdout + started.stderr
        assert "resuming" in said and "pushed private kernel alice/rgt-mlp-a2" in said, said
        assert f"mounts alice/rgt-mlp's output (run {first})" in said, said
        second = started.stdout.strip().splitlines()[-1]
        done = rgt("watch", "k1", second, "--until-done", "--timeout", "150", env=env,
                   timeout=200)
        assert done.returncode == 0, done.stdout + done.stderr
        assert fake.kernels["rgt-mlp-a2"]["versions"][-1]["kernel_sources"] == ["alice/rgt-mlp"]
        log = rgt("logs", "k1", second, env=env).stdout
        assert "continues from the previous version's checkpoints" in log, log[-2000:]
        resumed = [ln for ln in log.splitlines() if ln.startswith("resumed step=")]
        assert resumed and int(resumed[0].split("=")[1].split()[0]) >= 5, log[-2000:]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    home = {"RGT_HOME": str(tmp_path / "home")}
    one_line_exit_2(rgt("up", "c1", "--profile", "colab", env=home), "needs --drive PATH")
    one_line_exit_2(rgt("up", "c1", "--profile", "colab", "--drive", str(tmp_path / "nope"),
                        env=home), "no such folder")

    bare = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE")}
    bare.update(home, HOME=str(tmp_path / "nohome"), KAGGLE_CONFIG_DIR=str(tmp_path / "nohome"))
    done = subprocess.run([sys.executable, "-m", "rgt", "up", "k0", "--profile", "kaggle"],
                          env=bare, capture_output=True, text=True, timeout=60)
    one_line_exit_2(done, "no Kaggle credentials")

    gpu_job = write_job(tmp_path, "true", resources={"gpu": "T4:1"})
    with FakeKaggle(tmp_path / "kaggle", gpu_quota_s=0) as fake:
        env = {**client_env(fake, tmp_path), **home}
        one_line_exit_2(rgt("up", "k1", "--profile", "kaggle", "--disk", "50", env=env),
                        "cannot honour resources.disk '50G'", "20 GB")
        assert rgt("up", "k1", "--profile", "kaggle", env=env).returncode == 0
        one_line_exit_2(rgt("run", "k1", str(gpu_job), "-d", env=env),
                        "Kaggle GPU quota: 0.0 h", "nothing was pushed")
        big = write_job(tmp_path, "true", "big.yaml", resources={"disk": "30G"})
        one_line_exit_2(rgt("run", "k1", str(big), "-d", env=env), "resources.disk '30G'")
        assert not [m for m, _ in fake.requests if m == "SaveKernel"]
        assert not (tmp_path / "home" / "kaggle" / "k1" / "rgt").exists() or not list(
            (tmp_path / "home" / "kaggle" / "k1" / "rgt").glob("*/secrets.env"))

    with FakeKaggle(tmp_path / "kaggle2", refuse_saves="This account cannot push kernels "
                    "right now") as fake:
        env = {**client_env(fake, tmp_path), **home}
        assert rgt("up", "k2", "--profile", "kaggle", env=env).returncode == 0
        cpu_job = write_job(tmp_path, "true", "cpu.yaml")
        one_line_exit_2(rgt("run", "k2", str(cpu_job), "-d", env=env),
                        "Kaggle rejected the kernel push: This account cannot push kernels")
        assert json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][-1]["live_runs"] == 0


def test_audit_shows_the_quota_and_measures_nothing_on_this_machine(tmp_path):
    with FakeKaggle(tmp_path / "kaggle") as fake:
        env = {**client_env(fake, tmp_path), "RGT_HOME": str(tmp_path / "home")}
        assert rgt("up", "k1", "--profile", "kaggle", env=env).returncode == 0
        done = rgt("audit", "k1", "--json", env=env)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)["audit"]
        assert report["measured"] is False and "dirs" not in report and "python" not in report
        assert report["kaggle"]["owner"] == "alice" and report["kaggle"]["quota"]
        assert [v["id"] for v in report["verdicts"]] == ["", "KG"]
        shown = rgt("audit", "k1", env=env)
        assert shown.returncode == 0 and "Kaggle account: alice" in shown.stdout, shown.stderr
        assert "this machine's" not in shown.stdout


def test_a_queued_kernel_reads_queued_and_an_unknown_status_unknown(tmp_path):
    """While Kaggle queues the version, watch, ls and top say it waits (not running, not
    failed); a status Kaggle's client does not know reads 'unknown' with its raw value, as one
    printable line, and the run goes on once Kaggle says something rgt knows."""
    job = write_job(tmp_path, "echo trained")
    with FakeKaggle(tmp_path / "kaggle", queue_s=600) as fake:
        env = {**client_env(fake, tmp_path), "RGT_HOME": str(tmp_path / "home")}
        assert rgt("up", "k1", "--profile", "kaggle", env=env).returncode == 0
        started = rgt("run", "k1", str(job), "-d", env=env)
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip().splitlines()[-1]

        seen = json.loads(rgt("watch", "k1", run_id, "--json", env=env).stdout)["run"]
        said = " ".join(seen["causes"])
        assert seen["status"] == "starting", seen
        assert "queued on Kaggle: waiting for a session, not running yet" in said, said
        waiting = json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]["waiting"]
        assert waiting and "(kernel alice/rgt-mlp) queued on Kaggle" in waiting[0]["what"]
        top = rgt("top", "--once", env=env).stdout
        assert "waiting 0 min: attempt 1 (kernel alice/rgt-mlp) queued on Kaggle" in top, top

        fake.statuses["rgt-mlp"] = ["\x1b[31mPREEMPTED"]
        odd = rgt("watch", "k1", run_id, "--json", env=env)
        assert odd.returncode == 0 and "Traceback" not in odd.stderr, odd.stderr
        summary = json.loads(odd.stdout)["run"]
        assert summary["status"] == "unknown", summary
        assert "a status rgt does not know: \"'\\\\x1b[31mPREEMPTED'\"" in summary["causes"][0]
        shown = rgt("watch", "k1", run_id, env=env)
        assert shown.returncode == 0 and "\x1b" not in shown.stdout, shown.stdout
        assert "PREEMPTED" in shown.stdout
        assert json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]["waiting"] == []

        fake.statuses.clear()
        fake.queue_s = 0  # a session takes it
        done = rgt("watch", "k1", run_id, "--until-done", "--timeout", "120", "--json",
                   env=env, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["run"]["status"] == "succeeded"
