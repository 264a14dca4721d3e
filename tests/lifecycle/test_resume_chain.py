"""A job outlives its runs: one checkpoint home per job, `rgt resume`, `recover:`, chains.

Real detached runs on `local` boxes, killed with SIGKILL as a crash or an outbid spot instance
ends them; two trainers: the bundled `rgt.ckpt` example (deterministic: an interrupted and
resumed run ends bitwise equal to an uninterrupted one) and a plain torch script with its own
convention (a `ckpt.pt` in `--out_dir`, resumed with `--init_from=resume`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from importlib import resources
from pathlib import Path

import pytest
from boxkit import wait_for, write_job

torch = pytest.importorskip("torch")

PY = sys.executable

# A nanoGPT-style script rgt did not write: its own checkpoint file and resume flag.
OWN_TRAINER = '''
import argparse, os, time, torch
p = argparse.ArgumentParser()
p.add_argument("--out_dir", required=True)
p.add_argument("--init_from", default="scratch")
p.add_argument("--max_iters", type=int, default=40)
a = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
it = 0
path = os.path.join(a.out_dir, "ckpt.pt")
if a.init_from == "resume":
    ck = torch.load(path)
    model.load_state_dict(ck["model"]); opt.load_state_dict(ck["optimizer"]); it = ck["iter_num"]
    print(f"Resuming training from {a.out_dir} at iter {it}", flush=True)
g = torch.Generator().manual_seed(1)
xs = torch.randn(64, 4, generator=g)
while it < a.max_iters:
    x = xs[it % 64: it % 64 + 8]
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step(); it += 1
    print(f"iter {it}: loss {loss.item():.4f}", flush=True)
    if it % 5 == 0:
        tmp = path + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "iter_num": it}, tmp)
        os.replace(tmp, path)
    time.sleep(float(os.environ.get("STEP_S", "0.15")))
os.makedirs("out", exist_ok=True)
torch.save(model.state_dict(), "out/final.pt")
print(f"done iter {it}", flush=True)
'''
OWN_RUN = (f'{PY} train.py --out_dir "$RGT_CKPT_DIR" '
           '$( [ -f "$RGT_CKPT_DIR/ckpt.pt" ] && echo --init_from=resume )')


def own_job(directory: Path, **fields) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.py").write_text(OWN_TRAINER)
    return write_job(directory, name="gpt", run=OWN_RUN, outputs=["out"],
                     checkpoint_dir="$RGT_CKPT_DIR", **fields)


def mlp_job(directory: Path, sleep: float) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    example = resources.files("rgt.examples").joinpath("train_mlp.py").read_bytes()
    (directory / "train_mlp.py").write_bytes(example)
    return write_job(directory, name="mlp", outputs=["out"], checkpoint_dir="$RGT_CKPT_DIR",
                     run=f'{PY} train_mlp.py --steps 60 --save-every 10 --ckpt-dir '
                         f'"$RGT_CKPT_DIR" --out out --sleep {sleep}')


def up(cli, name: str) -> None:
    cli.ok("up", name)


def start(cli, box: str, spec: Path, *extra: str) -> str:
    return cli.ok("run", box, str(spec), *extra).stdout.strip().splitlines()[-1]


def home_of(cli, box: str, job: str) -> Path:
    return cli.home / "boxes" / box / "durable" / "rgt" / "jobs" / job / "ckpt"


def state_of(cli, box: str, run_id: str) -> dict:
    return json.loads((cli.home / "boxes" / box / "scratch" / "rgt" / run_id /
                       "state.json").read_text())


def sigkill_job(cli, box: str, run_id: str) -> None:
    """SIGKILL the trainer's whole process group, as an OOM kill or a dead host does."""
    pid = wait_for(lambda: state_of(cli, box, run_id).get("pid"))
    os.killpg(pid, signal.SIGKILL)


def until_done(cli, box: str, run_id: str, ok: bool = True) -> str:
    result = cli("watch", box, run_id, "--until-done", "--timeout", "120")
    assert (result.returncode == 0) == ok, result.stdout + result.stderr
    return result.stdout


def runs_json(cli, box: str | None = None) -> list[dict]:
    return json.loads(cli.ok("runs", *([box] if box else []), "--json").stdout)["runs"]


def final_tensors(path: Path) -> dict:
    return torch.load(path, weights_only=True)["model"]


def test_killed_rgt_ckpt_run_resumes_to_bitwise_equal_weights(cli, tmp_path):
    up(cli, "ref")
    ref = start(cli, "ref", mlp_job(tmp_path / "ref", sleep=0))
    until_done(cli, "ref", ref)
    cli.ok("pull", "ref", ref, "--dest", str(tmp_path / "ref-results"))

    up(cli, "box")
    spec = mlp_job(tmp_path / "job", sleep=0.05)
    first = start(cli, "box", spec)
    home = home_of(cli, "box", "mlp")
    wait_for(lambda: any(p.name.endswith("0030.pt") for p in home.glob("ckpt-*.pt")), 60)
    sigkill_job(cli, "box", first)
    watched = until_done(cli, "box", first, ok=False)
    assert "SIGKILL" in watched and f"rgt resume box {first}" in watched
    assert "ckpt-" in watched  # names the checkpoint the next attempt starts from

    second = cli.ok("resume", "box", first).stdout.strip().splitlines()[-1]
    assert second != first
    until_done(cli, "box", second)
    log = cli.ok("logs", "box", second).stdout
    resumed = int(log.split("resumed step=")[1].split()[0])
    assert resumed >= 30, log

    dest = tmp_path / "results"
    pulled = cli.ok("pull", "box", second, "--dest", str(dest))
    assert "verified" in pulled.stdout
    verified = cli.verified("box", second)
    assert any(f["path"].startswith("ckpt/ckpt-") for f in verified["files"])
    assert "fresh start" in (dest / "logs" / f"{first}.log").read_text()  # each attempt's log
    assert "resumed step=" in (dest / "logs" / f"{second}.log").read_text()
    a = final_tensors(tmp_path / "ref-results" / "out" / "final.pt")
    b = final_tensors(dest / "out" / "final.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    chain = {r["id"]: r for r in runs_json(cli, "box")}
    assert chain[second]["resumes"] == first and chain[second]["attempt"] == 2
    assert chain[first]["resumed_by"] == second and chain[first]["status"] == "failed"
    table = cli.ok("runs", "box").stdout
    assert "2 ←" in table

    # the superseded first attempt need not be pulled: its checkpoints came with the second
    down = cli("down", "box", "--yes")
    assert down.returncode == 0, down.stdout + down.stderr


def test_own_convention_trainer_resumes_and_fresh_starts_over(cli, tmp_path):
    up(cli, "box")
    spec = own_job(tmp_path / "job")
    first = start(cli, "box", spec)
    home = home_of(cli, "box", "gpt")
    wait_for(lambda: (home / "ckpt.pt").exists(), 60)
    sigkill_job(cli, "box", first)
    until_done(cli, "box", first, ok=False)

    # Launching the identical job again resumes from its home and chains to the dead attempt.
    again = cli.ok("run", "box", str(spec))
    assert "resuming" in again.stdout and "ckpt.pt" in again.stdout
    second = again.stdout.strip().splitlines()[-1]
    until_done(cli, "box", second)
    log = cli.ok("logs", "box", second).stdout
    assert "Resuming training from" in log and "done iter 40" in log
    assert runs_json(cli, "box")[-1]["resumes"] == first

    fresh = cli.ok("run", "box", str(spec), "--fresh")
    assert "moved the job's old checkpoints aside" in fresh.stdout
    third = fresh.stdout.strip().splitlines()[-1]
    until_done(cli, "box", third)
    assert "Resuming" not in cli.ok("logs", "box", third).stdout
    assert list(home.parent.glob("ckpt.before-*/ckpt.pt")), "--fresh must keep the old home"


def test_recover_restarts_a_crashed_trainer_by_itself(cli, tmp_path):
    up(cli, "box")
    spec = own_job(tmp_path / "job", recover={"max_restarts": 2, "backoff_s": 0.5})
    run_id = start(cli, "box", spec)
    wait_for(lambda: (home_of(cli, "box", "gpt") / "ckpt.pt").exists(), 60)
    sigkill_job(cli, "box", run_id)
    watched = until_done(cli, "box", run_id)
    assert "restart   1: after exit 137 SIGKILL (crashed)" in watched
    log = cli.ok("logs", "box", run_id).stdout
    assert "restart 1/2" in log and "Resuming training from" in log and "done iter 40" in log


def test_recover_gives_up_after_max_restarts(cli, tmp_path):
    up(cli, "box")
    spec = write_job(tmp_path / "job", run="echo crash; exit 3",
                     recover={"max_restarts": 2, "backoff_s": 0.1})
    run_id = start(cli, "box", spec)
    until_done(cli, "box", run_id, ok=False)
    state = state_of(cli, "box", run_id)
    assert [r["exit_code"] for r in state["restarts"]] == [3, 3]
    assert state["exit_code"] == 3 and state["status"] == "failed"


def test_resume_onto_another_box_carries_the_checkpoints(cli, tmp_path):
    up(cli, "old")
    spec = own_job(tmp_path / "job")
    first = start(cli, "old", spec)
    wait_for(lambda: (home_of(cli, "old", "gpt") / "ckpt.pt").exists(), 60)
    sigkill_job(cli, "old", first)
    until_done(cli, "old", first, ok=False)

    up(cli, "new")
    moved = cli.ok("resume", "old", first, "--on", "new")
    assert "carried the job's checkpoints from old:" in moved.stdout
    second = moved.stdout.strip().splitlines()[-1]
    until_done(cli, "new", second)
    assert "Resuming training from" in cli.ok("logs", "new", second).stdout
    cli.ok("pull", "new", second, "--dest", str(tmp_path / "results"))
    assert cli("down", "new", "--yes").returncode == 0
    # the old box's attempt was superseded by the new box's: down goes through there too
    assert cli("down", "old", "--yes").returncode == 0


def test_resume_refuses_what_cannot_be_resumed(cli, tmp_path):
    up(cli, "box")
    spec = write_job(tmp_path / "job", run="echo ok")
    run_id = start(cli, "box", spec)
    until_done(cli, "box", run_id)
    done = cli("resume", "box", run_id)
    assert done.returncode == 2 and "nothing to resume" in done.stderr
    assert "Traceback" not in done.stderr
    missing = cli("resume", "box", "no-such-run")
    assert missing.returncode == 2 and "not found" in missing.stderr
    nowhere = cli("resume", "box", run_id, "--on", "ghost")
    assert nowhere.returncode == 2 and "no box named 'ghost'" in nowhere.stderr


def test_checkpoint_dir_inside_the_code_copy_is_refused(cli, tmp_path):
    up(cli, "box")
    spec = write_job(tmp_path / "job", run="echo ok", checkpoint_dir="ckpt")
    refused = cli("run", "box", str(spec))
    assert refused.returncode == 2 and "$RGT_CKPT_DIR" in refused.stderr
    absolute = tmp_path / "my-ckpts"
    spec = write_job(tmp_path / "job", run='echo x > "$RGT_CKPT_DIR/state.txt"',
                     checkpoint_dir=str(absolute))
    run_id = start(cli, "box", spec)
    until_done(cli, "box", run_id)
    assert (absolute / "state.txt").read_text() == "x\n"


def test_resume_on_its_own_box_is_a_same_box_resume(cli, tmp_path):
    up(cli, "box")
    run_id = start(cli, "box", write_job(tmp_path / "job", run="exit 3"))
    until_done(cli, "box", run_id, ok=False)
    again = cli("resume", "box", run_id, "--on", "box")  # nothing to carry: no carry attempted
    assert again.returncode == 0, again.stdout + again.stderr
    assert "carried" not in again.stdout and "started attempt 2" in again.stdout
