"""Colab through rgt's command line: up with a Drive folder → run writes the notebook and the
code to Drive → the notebook runs (nbclient, the stand-in google.colab whose Drive is that
folder, uploading lazily) → watch reads its state from the folder → pull verifies (and refuses
a file the sync has not finished) → down says what stays on Drive."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli import rgt
from colabkit import ColabVM, run_in_thread

from rgt.examples import train_mlp

torch = pytest.importorskip("torch")
pytest.importorskip("nbclient")


def write_job(tmp: Path, steps: int, sleep: float, **extra) -> Path:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    shutil.copy(train_mlp.__file__, work / "train_mlp.py")
    spec = {"name": "mlp", "workdir": str(work),
            "run": f"{Path(sys.executable)} train_mlp.py --steps {steps} --save-every 5 "
                   f'--metrics-every 5 --sleep {sleep} --ckpt-dir "$RGT_CKPT_DIR" --out out',
            "outputs": ["out"], "checkpoint_dir": "$RGT_CKPT_DIR", **extra}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def watch_json(env: dict, *args: str) -> dict:
    done = rgt("watch", "c1", *args, "--json", env=env)
    assert done.returncode in (0, 1, 4), done.stderr
    return json.loads(done.stdout)["run"]


def test_colab_up_run_notebook_watch_pull_down(tmp_path):
    vm = ColabVM(tmp_path, delay_s=0.3)  # vm.cloud: Google's side, what the sync folder shows
    env = {"RGT_HOME": str(tmp_path / "home")}
    job = write_job(tmp_path, steps=40, sleep=0.1)

    up = rgt("up", "c1", "--profile", "colab", "--drive", str(vm.cloud), env=env)
    assert up.returncode == 0, up.stderr
    assert "Google Drive through" in up.stdout

    started = rgt("run", "c1", str(job), "-d", env=env)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip().splitlines()[-1]
    drive_run = vm.cloud / "rgt" / run_id
    notebooks = list(drive_run.glob("*.ipynb"))
    assert len(notebooks) == 1 and (drive_run / "code.tar.gz").is_file()
    assert f"MyDrive/rgt/{run_id}/{notebooks[0].name}" in started.stdout
    assert not list(vm.cloud.rglob("secrets.env")) and not (drive_run / "lib").exists()

    waiting = watch_json(env)
    assert waiting["status"] == "starting" and "Run all" in " ".join(waiting["causes"])

    # the user opens the notebook from Drive and runs it; watch follows it from the folder
    thread, errors = run_in_thread(vm, json.loads(notebooks[0].read_text()))
    seen = set()
    deadline = time.monotonic() + 90
    while thread.is_alive() and time.monotonic() < deadline:
        seen.add(watch_json(env, run_id)["status"])
        time.sleep(1.0)
    thread.join(60)
    assert not errors, errors
    assert "running" in seen, seen
    done = watch_json(env, run_id)
    assert done["status"] == "succeeded", done
    assert done["training"].get("step") == 40 or done["last_checkpoint"], done

    logs = rgt("logs", "c1", run_id, "-n", "5", env=env)
    assert logs.returncode == 0 and "final" in logs.stdout.lower() + " final", logs.stderr

    # the sync folder shows a name before its bytes (NB1): pull refuses, then succeeds
    final = drive_run / "out" / "out" / "final.pt"
    whole = final.read_bytes()
    final.write_bytes(b"")
    early = rgt("pull", "c1", run_id, "--dest", str(tmp_path / "pulled"), env=env)
    assert early.returncode == 2, early.stdout + early.stderr
    assert "out/out/final.pt (0 of" in early.stderr and "wait for the sync" in early.stderr
    final.write_bytes(whole)
    pulled = rgt("pull", "c1", run_id, "--dest", str(tmp_path / "pulled"), "--json", env=env)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    report = json.loads(pulled.stdout)["pull"]
    assert report["ok"] and report["run_status"] == "succeeded", report
    got = tmp_path / "pulled" / "out" / "final.pt"
    manifest = [json.loads(x) for x in (drive_run / "MANIFEST.jsonl").read_text().splitlines()]
    entry = next(m for m in manifest if m.get("path") == "out/out/final.pt")
    assert hashlib.sha256(got.read_bytes()).hexdigest() == entry["sha256"]
    assert list((tmp_path / "pulled" / "ckpt").glob("ckpt-*.pt"))
    assert (tmp_path / "pulled" / "logs" / f"{run_id}.log").is_file()

    listed = json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]
    assert any(r["what"].startswith("Drive: rgt keeps") for r in listed["at_risk"]), listed

    down = rgt("down", "c1", "--yes", env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    text = " ".join(down.stdout.split())
    assert "bills nothing" in text and "Kept on Drive" in text, text
    assert drive_run.is_dir()  # Drive is the user's: rgt deletes nothing there
    gone = json.loads(rgt("ls", "--all", "--json", env=env).stdout)["boxes"][0]
    assert gone["state"] == "down" and "Google storage quota" in gone["still_billing"][0]


def test_render_writes_one_notebook_whose_code_restores_from_inside_it(tmp_path, monkeypatch):
    job = write_job(tmp_path, steps=10, sleep=0)
    out = tmp_path / "train.ipynb"
    done = rgt("render", str(job), "--profile", "colab", "-o", str(out),
               env={"RGT_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    nb = json.loads(out.read_text())
    # the config and runtime cells, run here without a kernel: restore needs no Drive
    namespace: dict = {}
    exec("".join(nb["cells"][1]["source"]) + "".join(nb["cells"][2]["source"]), namespace)
    config = namespace["RGT_CONFIG"]
    assert config["source"]["kind"] == "inline"
    monkeypatch.setenv("RGT_COLAB_CONTENT", str(tmp_path / "content"))
    work = Path(namespace["rgt_restore"](config))
    assert (work / "train_mlp.py").read_bytes() == Path(train_mlp.__file__).read_bytes()
    config["source"]["data"] = config["source"]["data"][:-8] + "AAAAAAA="
    with pytest.raises(namespace["RgtError"], match="was changed"):
        namespace["rgt_restore"](config)
    too_many = rgt("render", str(job), "--profile", "colab", "--cpus", "8",
                   env={"RGT_HOME": str(tmp_path / "home")})
    assert too_many.returncode == 2 and "colab cannot honour resources.cpus" in too_many.stderr


def test_a_silent_runtime_reads_paused_and_secrets_never_reach_drive(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    env = {"RGT_HOME": str(tmp_path / "home"), "HF_TOKEN": "hf_secret_value"}
    assert rgt("up", "c1", "--profile", "colab", "--drive", str(drive), env=env).returncode == 0

    leaky = write_job(tmp_path, steps=5, sleep=0, secrets=["HF_TOKEN"])
    refused = rgt("run", "c1", str(leaky), "-d", env=env)
    assert refused.returncode == 2 and "Secrets panel" in refused.stderr, refused.stderr
    for root in (drive, tmp_path / "home"):
        assert not [p for p in root.rglob("*") if p.is_file()
                    and b"hf_secret_value" in p.read_bytes()], root

    job = write_job(tmp_path, steps=5, sleep=0)
    run_id = rgt("run", "c1", str(job), "-d", env=env).stdout.strip().splitlines()[-1]
    state = drive / "rgt" / run_id / "state.json"
    state.write_text(json.dumps({"status": "running", "sessions": 1, "heartbeat": time.time()}))
    assert watch_json(env, run_id)["status"] == "running"
    state.write_text(json.dumps({"status": "running", "sessions": 1,
                                 "heartbeat": time.time() - 3600}))
    paused = watch_json(env, run_id)
    assert paused["status"] == "paused", paused
    assert "no heartbeat on Drive for 60 min" in paused["causes"][0]
    assert "Run all" in paused["advice"]


def test_ls_shows_drive_free_space_where_the_folder_is_a_mount_of_its_own(tmp_path, tmpfs):
    drive = tmpfs("size=64m")  # like an rclone mount: its size is what the remote reports
    env = {"RGT_HOME": str(tmp_path / "home")}
    assert rgt("up", "c1", "--profile", "colab", "--drive", str(drive), env=env).returncode == 0
    (drive / "rgt" / "blob").write_bytes(b"x" * (8 << 20))
    risks = json.loads(rgt("ls", "--json", env=env).stdout)["boxes"][0]["at_risk"]
    assert risks[0]["what"].startswith("Drive: rgt keeps 0.0 MiB"), risks  # as measured at up
    assert "free of 64.0 MiB" in risks[0]["what"], risks
    shown = rgt("ls", env={**env, "COLUMNS": "80"}).stdout
    assert "at risk: Drive: rgt keeps" in shown, shown


def test_audit_measures_nothing_on_a_runtime_it_cannot_reach(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    env = {"RGT_HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    assert rgt("up", "c1", "--profile", "colab", "--drive", str(drive), env=env).returncode == 0
    done = rgt("audit", "c1", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["audit"]
    assert report["measured"] is False  # this laptop's disks and Python are not the runtime's
    assert not {"dirs", "python", "gpus", "nproc", "job_python"} & set(report)
    assert report["colab"]["drive"] == str(drive)
    assert [v["level"] for v in report["verdicts"]] == ["note", "ok"]  # why; Drive's space
    shown = rgt("audit", "c1", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "no disks, GPUs or Python measured" in shown.stdout
    assert "Drive folder:" in shown.stdout
    assert "this machine's" not in shown.stdout and "Traceback" not in shown.stderr
    drive.rename(tmp_path / "gone")  # Drive for desktop signed out: the platform's check fails
    gone = rgt("audit", "c1", env=env)
    # the verdict names the Drive folder, so a long temporary path wraps it over two lines
    assert gone.returncode == 1 and "is gone" in " ".join(gone.stdout.split()), gone.stdout
