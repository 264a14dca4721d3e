"""rgt's Kaggle kernels through the official client (kaggle 2.2.4) against fake_kaggle.py,
each version's script run here with input/, working/ and temp/ as directories."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fake_kaggle import FakeKaggle, client_env

from rgt.examples import train_mlp

torch = pytest.importorskip("torch")
pytest.importorskip("kaggle")
HERE = Path(__file__).parent
STEPS = 40
# one attempt's budget: the job (torch's import takes seconds on a loaded machine) must save a
# checkpoint (every 5 steps) inside it, and must not finish its STEPS * SLEEP_S = 20 s in it
BUDGET_S, SLEEP_S = 15, 0.5


def drive(fake: FakeKaggle, home: Path, verb: str, env_extra=None, **args) -> dict:
    env = {**os.environ, **client_env(fake, home), **(env_extra or {})}
    done = subprocess.run([sys.executable, str(HERE / "kaggle_driver.py"), verb,
                           json.dumps(args)], env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_spec(tmp: Path, run: str, **extra) -> Path:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    (work / "train_mlp.py").write_bytes(Path(train_mlp.__file__).read_bytes())
    spec = {"name": "mlp", "workdir": "work", "run": run, "outputs": ["out"],
            "checkpoint_dir": "$RGT_CKPT_DIR", **extra}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def train(steps: int, sleep: float) -> str:
    return (f"python train_mlp.py --steps {steps} --save-every 5 --sleep {sleep} "
            '--ckpt-dir "$RGT_CKPT_DIR" --out out')


def test_session_cap_continues_in_a_new_version_from_the_checkpoint(tmp_path):
    spec = write_spec(tmp_path, train(STEPS, SLEEP_S))
    with FakeKaggle(tmp_path / "kaggle") as fake:
        first = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                      dest=str(tmp_path / "k1"), budget_s=BUDGET_S, grace_s=20)
        assert "error" not in first, first
        assert first["meta"]["enable_internet"] is True and first["meta"]["enable_gpu"] is False
        assert drive(fake, tmp_path, "wait", id=first["id"])["status"] == "complete"
        status1 = json.loads((fake.kernels["rgt-mlp"]["versions"][0]["output"] / "rgt" /
                              "status.json").read_text())
        assert status1["status"] == "continue" and status1["exit_code"] == 85, status1
        assert 0 < status1["step"] < STEPS

        second = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=2,
                       dest=str(tmp_path / "k2"), budget_s=None, previous=first["id"])
        assert "error" not in second, second
        assert second["meta"]["kernel_sources"] == [first["id"]]
        assert drive(fake, tmp_path, "wait", id=second["id"])["status"] == "complete"
        pulled = tmp_path / "pulled"
        files = drive(fake, tmp_path, "output", id=second["id"], dest=str(pulled))["files"]
        assert files

    status = json.loads((pulled / "rgt" / "status.json").read_text())
    assert status["status"] == "succeeded", status
    log = (pulled / "rgt" / "log.txt").read_text()
    assert f"resumed step={status1['step']}" in log
    manifest = [json.loads(x) for x in (pulled / "rgt" / "MANIFEST.jsonl").read_text()
                .splitlines()]
    entries = [m for m in manifest if "sha256" in m]
    assert {m["path"] for m in entries} == {"outputs/out/final.pt", "outputs/out/metrics.json"}
    for m in entries:
        assert hashlib.sha256((pulled / "rgt" / m["path"]).read_bytes()).hexdigest() == \
            m["sha256"]
    ref = tmp_path / "ref"
    subprocess.run([sys.executable, train_mlp.__file__, "--steps", str(STEPS), "--save-every",
                    "5", "--ckpt-dir", str(ref / "ckpt"), "--out", str(ref / "out")],
                   check=True, capture_output=True, timeout=120)
    got = torch.load(pulled / "rgt" / "outputs" / "out" / "final.pt", weights_only=True)
    want = torch.load(ref / "out" / "final.pt", weights_only=True)
    assert all(torch.equal(got["model"][k], want["model"][k]) for k in want["model"])


def test_a_failing_job_still_leaves_its_log_and_status(tmp_path):
    spec = write_spec(tmp_path, "echo about to fail; exit 3")
    with FakeKaggle(tmp_path / "kaggle") as fake:
        pushed = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                       dest=str(tmp_path / "k1"), budget_s=None)
        assert drive(fake, tmp_path, "wait", id=pushed["id"])["status"] == "complete"  # NB2
        drive(fake, tmp_path, "output", id=pushed["id"], dest=str(tmp_path / "pulled"))
    status = json.loads((tmp_path / "pulled" / "rgt" / "status.json").read_text())
    assert status["status"] == "failed" and status["exit_code"] == 3
    assert "about to fail" in (tmp_path / "pulled" / "rgt" / "log.txt").read_text()


def test_outputs_over_the_working_limit_keep_the_checkpoints(tmp_path):
    spec = write_spec(tmp_path, train(10, 0))
    with FakeKaggle(tmp_path / "kaggle") as fake:
        pushed = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                       dest=str(tmp_path / "k1"), budget_s=None, working_limit=20_000)
        assert drive(fake, tmp_path, "wait", id=pushed["id"])["status"] == "complete"
        drive(fake, tmp_path, "output", id=pushed["id"], dest=str(tmp_path / "pulled"))
    status = json.loads((tmp_path / "pulled" / "rgt" / "status.json").read_text())
    assert status["status"] == "failed" and "over its 0 GB limit" in status["cause"]
    assert list((tmp_path / "pulled" / "rgt" / "ckpt").glob("ckpt-*.pt"))


def test_bad_input_each_one_clear_line(tmp_path):
    spec = write_spec(tmp_path, "true", resources={"gpu": "T4:1"})
    with FakeKaggle(tmp_path / "kaggle", gpu_quota_s=0) as fake:
        quota = drive(fake, tmp_path, "quota")
        assert quota["gpu_left_s"] == 0
        refused = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                        dest=str(tmp_path / "k1"), budget_s=None)
        assert refused["error"].startswith("Kaggle rejected the kernel push: You have "
                                           "exceeded your weekly GPU quota")
        assert fake.requests[-1][1]["enableGpu"] is True
        assert fake.requests[-1][1]["machineShape"] == "NvidiaTeslaT4"
        a100 = write_spec(tmp_path, "true", resources={"gpu": "A100:1"})
        assert "Kaggle cannot honour resources.gpu 'A100:1'" in drive(
            fake, tmp_path, "push", spec=str(a100), run_id="r1", attempt=1,
            dest=str(tmp_path / "k2"), budget_s=None)["error"]
        wrong = {"KAGGLE_KEY": "not-the-key"}
        assert "credentials were not accepted (401)" in drive(fake, tmp_path, "quota",
                                                              env_extra=wrong)["error"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE")}
    env.update(HOME=str(tmp_path / "nohome"), KAGGLE_CONFIG_DIR=str(tmp_path / "nohome"))
    done = subprocess.run([sys.executable, str(HERE / "kaggle_driver.py"), "quota", "{}"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout.strip().splitlines()[-1])["error"].startswith(
        "no Kaggle credentials")


def many_outputs(count: int) -> str:
    return (f"python -c \"import os; os.makedirs('out', exist_ok=True); "
            f"[open(f'out/f{{i:03d}}.txt', 'w').write(str(i)) for i in range({count})]\"")


def test_an_output_listing_of_many_pages_is_followed_to_its_end(tmp_path):
    """Kaggle hands a version's output out a page at a time (nextPageToken); every file of a
    kernel with more outputs than one page is pulled, each checked by the manifest."""
    spec = write_spec(tmp_path, many_outputs(23))
    with FakeKaggle(tmp_path / "kaggle", page_cap=7) as fake:
        pushed = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                       dest=str(tmp_path / "k1"), budget_s=None)
        assert drive(fake, tmp_path, "wait", id=pushed["id"])["status"] == "complete"
        files = drive(fake, tmp_path, "output", id=pushed["id"],
                      dest=str(tmp_path / "pulled"))["files"]
        listings = [body for method, body in fake.requests
                    if method == "ListKernelSessionOutput"]
    pulled = tmp_path / "pulled" / "rgt"
    entries = [json.loads(x) for x in (pulled / "MANIFEST.jsonl").read_text().splitlines()]
    entries = [e for e in entries if "sha256" in e]
    assert len(entries) == 23 and len(files) > 23, (len(entries), len(files))
    for e in entries:
        assert hashlib.sha256((pulled / e["path"]).read_bytes()).hexdigest() == e["sha256"]
    assert len(listings) == -(-len(files) // 7) >= 4, listings  # 7 a page, the server's cap
    assert not listings[0].get("pageToken") and all(b.get("pageToken") for b in listings[1:])
    assert {b["pageSize"] for b in listings} == {100}


def test_a_queued_version_reads_queued_then_runs(tmp_path):
    """A pushed version waits in Kaggle's queue before a session takes it (the fake answers
    QUEUED as protobuf does: no status field at all)."""
    spec = write_spec(tmp_path, "sleep 2")
    with FakeKaggle(tmp_path / "kaggle", queue_s=6) as fake:
        first = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                      dest=str(tmp_path / "k1"), budget_s=None)
        waited = drive(fake, tmp_path, "wait", id=first["id"])
        assert waited["seen"] == ["queued", "running", "complete"], waited


def test_statuses_rgt_does_not_know_are_unknown_with_the_raw_value(tmp_path):
    """A status the enum lacks (the client itself raises KeyError on it), a number, a control
    sequence: each is 'unknown' with the value as one printable line, never a crash."""
    from rgt.platforms.kaggle.api import parse_status

    assert parse_status({"status": "KERNEL_WORKER_STATUS_RUNNING"}).name == "running"
    assert parse_status({"status": "cancelAcknowledged"}).name == "cancel_acknowledged"
    assert parse_status({}).name == "queued"  # protobuf's JSON leaves the default (0) out
    evil = parse_status({"status": "\x1b[2J" + "x" * 500, "failureMessage": "a\nb"})
    assert evil.name == "unknown" and "\x1b" not in evil.raw and len(evil.raw) <= 80, evil
    assert evil.failure == "'a\\nb'"
    assert parse_status(["RUNNING"]).raw.startswith("an answer that is not an object")
    spec = write_spec(tmp_path, "true")
    with FakeKaggle(tmp_path / "kaggle") as fake:
        pushed = drive(fake, tmp_path, "push", spec=str(spec), run_id="r1", attempt=1,
                       dest=str(tmp_path / "k1"), budget_s=None)
        for said, raw in (("PREEMPTED", "PREEMPTED"), (7, "7"), (None, "None")):
            fake.statuses["rgt-mlp"] = [said]
            seen = drive(fake, tmp_path, "wait", id=pushed["id"], timeout=0.5)
            assert (seen["status"], seen["raw"]) == ("unknown", raw), seen
