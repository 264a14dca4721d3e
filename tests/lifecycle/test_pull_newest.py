"""The job's checkpoint home is pulled whether the spec declares it or not, and "the newest
checkpoint" is one thing for `watch`, `pull` and `rgt ckpt ls`: the last one written, a unit
with any damaged file damaged as a whole. A real accelerate trainer (`save_state`) on the local
box writes them: a first attempt's step_10..step_30, then a resumed attempt that counts from 0
again (step_5, step_15), its last save cut short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from boxkit import wait_for, write_job

pytest.importorskip("accelerate")
# one worker runs this module in order: its tests share one run, and `down` comes last
pytestmark = pytest.mark.xdist_group("pull-newest")

ACCELERATE_TRAINER = """\
import os, time, torch
from accelerate import Accelerator
home = os.environ["RGT_CKPT_DIR"]
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
x, y = torch.randn(64, 8), torch.randn(64, 2)
now = time.time()
# (step, seconds ago): the resumed attempt's step_5 and step_15 were written after step_30
for step, ago in ((10, 500), (20, 400), (30, 300), (5, 200), (15, 100)):
    for _ in range(5):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step(); scheduler.step(); optimizer.zero_grad()
    saved = f"{home}/step_{step}"
    accelerator.save_state(saved)
    for name in os.listdir(saved):
        os.utime(f"{saved}/{name}", (now - ago, now - ago))
weights = f"{home}/step_15/model.safetensors"  # the last save, cut short: its weights only
with open(weights, "r+b") as f:
    f.truncate(os.path.getsize(weights) - 7)
os.utime(weights, (now - 100, now - 100))
print("saved", flush=True)
"""


def home_of(cli) -> Path:
    return next(cli.home.glob("boxes/box/**/jobs/job/ckpt"))


@pytest.fixture(scope="module")
def accelerate_run(tmp_path_factory):
    """One finished run of the accelerate trainer, its spec declaring no checkpoint_dir and
    no outputs (as the README's nanoGPT recipe): (cli, run id, tmp dir). Shared: every test
    here only reads the box, pulls into a directory of its own, or comes last (`down`)."""
    from boxkit import Rgt

    tmp = tmp_path_factory.mktemp("accelerate")
    cli = Rgt(tmp / "rgt-home")
    (tmp / "job").mkdir()
    (tmp / "job" / "train.py").write_text(ACCELERATE_TRAINER)
    spec = write_job(tmp / "job", run="python3 train.py")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "120")
    return cli, run_id, tmp


def test_an_undeclared_home_is_pulled_and_the_newest_intact_checkpoint_comes(accelerate_run):
    cli, run_id, tmp = accelerate_run
    refused = cli("down", "box", "--yes")
    assert refused.returncode == 3 and "never pulled" in refused.stderr, refused.stderr
    dest = tmp / "pulled"
    report = json.loads(cli.ok("pull", "box", run_id, "--dest", str(dest), "--json")
                        .stdout)["pull"]
    assert report["ok"], report["problems"]
    pulled = sorted(p.name for p in (dest / "ckpt").iterdir())
    # the last written (step_15) is damaged, so the next newest came: step_5, not step_30
    assert pulled == ["step_15", "step_5"], pulled
    units = {c["path"]: (c["kind"], c["step"], c["ok"]) for c in report["checkpoints"]}
    assert units == {"ckpt/step_15": ("accelerate", 15, False),
                     "ckpt/step_5": ("accelerate", 5, True)}, units
    assert any("the newest checkpoint step_15 is damaged on the box" in n
               and "also brought step_5, the newest intact one (step 5)" in n
               for n in report["notes"]), report["notes"]
    assert any("declares no checkpoint_dir" in n for n in report["notes"])
    assert any("step_15/model.safetensors: damaged on the box too" in w
               for w in report["warnings"]), report["warnings"]
    assert report["checkpoints_left"]["names"] == ["step_30", "step_20", "step_10"]
    assert report["home"]["files"] == 5 * 4 and report["home"]["newest"] == "step_15"
    for name in ("model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl"):
        assert (dest / "ckpt" / "step_5" / name).is_file(), name


def test_watch_and_ckpt_ls_name_the_same_newest(accelerate_run):
    cli, run_id, _ = accelerate_run
    watched = json.loads(cli.ok("watch", "box", run_id, "--json").stdout)["run"]
    assert watched["last_checkpoint"]["name"] == "step_15", watched["last_checkpoint"]
    assert watched["last_checkpoint"]["step"] == 15
    listed = json.loads(cli.ok("ckpt", "ls", str(home_of(cli)), "--json").stdout)
    assert [(c["path"], c["kind"], c["step"], c["ok"]) for c in listed["checkpoints"]] == [
        ("step_10", "accelerate", 10, True), ("step_20", "accelerate", 20, True),
        ("step_30", "accelerate", 30, True), ("step_5", "accelerate", 5, True),
        ("step_15", "accelerate", 15, False)]
    assert listed["newest"] == "step_15" and listed["newest_intact"] == "step_5"
    table = cli.ok("ckpt", "ls", str(home_of(cli))).stdout
    assert "newest: step_15 (the last written) is damaged; the newest intact is step_5" in \
        table


def test_ckpt_verify_takes_an_accelerate_state_dir_as_one_checkpoint(accelerate_run):
    cli, _, _ = accelerate_run
    good = cli("ckpt", "verify", str(home_of(cli) / "step_5"))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "OK" in good.stdout and "kind=accelerate" in good.stdout and "step=5" in good.stdout
    assert "random_states_0.pkl: pickle; checked: parse — zip + pickle opcodes complete (an " \
        "RNG state: parsed, never unpickled)" in good.stdout
    bad = cli("ckpt", "verify", str(home_of(cli) / "step_15"))
    assert bad.returncode == 1 and "DAMAGED" in bad.stdout and "step=15" in bad.stdout
    assert "BAD model.safetensors" in bad.stdout, bad.stdout


def test_down_names_every_checkpoint_it_destroys(accelerate_run):
    cli, run_id, tmp = accelerate_run
    cli.ok("pull", "box", run_id, "--dest", str(tmp / "again"))
    down = cli("down", "box", input="box\n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"3 older checkpoint(s) of {run_id}" in down.stdout
    assert "step_30, step_20, step_10" in down.stdout, down.stdout


CANCELLED_TRAINER = """\
import os, signal, time
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
with open(os.path.join(os.environ["RGT_CKPT_DIR"], "model_state.pth"), "wb") as f:
    f.write(os.urandom(4096))
print("training", flush=True)
while not stop:
    time.sleep(0.05)
"""


def test_a_cancelled_run_pulls_its_undeclared_home_before_down_goes(cli, tmp_path):
    """The issue's case: after a cancel, pull said `verified 0 files` and down went through
    while model_state.pth existed only on the box."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(CANCELLED_TRAINER)
    spec = write_job(tmp_path / "job", run="python3 train.py")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    log = cli.home / "boxes" / "box" / "scratch" / "rgt" / run_id / "log"
    wait_for(lambda: log.exists() and "training" in log.read_text(), timeout=60)
    cli.ok("cancel", "box", run_id, "--yes")
    report = json.loads(cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "r"),
                               "--json").stdout)["pull"]
    assert report["ok"] and report["run_status"] == "cancelled", report
    pulled = tmp_path / "r" / "ckpt" / "model_state.pth"
    assert pulled.read_bytes() == (home_of(cli) / "model_state.pth").read_bytes()
    assert report["counts"]["files"] == 1
    cli.ok("down", "box", "--yes")


WRITES_ITS_RUN = """\
import os
with open(os.path.join(os.environ["RGT_CKPT_DIR"], "model_state.pth"), "w") as f:
    f.write(os.environ["RGT_RUN_ID"])
"""


def test_after_fresh_an_earlier_run_pulls_its_moved_aside_home(cli, tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(WRITES_ITS_RUN)
    spec = write_job(tmp_path / "job", run="python3 train.py")
    cli.ok("up", "box")
    runs = []
    for fresh in ((), ("--fresh",), ("--fresh",)):  # two moves aside, maybe in one second
        runs.append(cli.ok("run", "box", str(spec), "-d", *fresh).stdout.strip()
                    .splitlines()[-1])
        cli.ok("watch", "box", runs[-1], "--until-done", "--timeout", "60")
    for run_id in runs:
        dest = tmp_path / run_id
        report = json.loads(cli.ok("pull", "box", run_id, "--dest", str(dest), "--json")
                            .stdout)["pull"]
        assert report["ok"], report["problems"]
        # each run's own checkpoints, not the home the next --fresh run started over in
        assert (dest / "ckpt" / "model_state.pth").read_text() == run_id, run_id
        moved = any("moved this run's checkpoint home aside" in n for n in report["notes"])
        assert moved == (run_id != runs[-1]), report["notes"]
    homes = [p.name for p in home_of(cli).parent.iterdir() if p.name.startswith("ckpt")]
    assert len(homes) == 3, homes  # the home and two asides
    cli.ok("down", "box", "--yes")


def test_fresh_never_moves_a_home_into_an_aside_of_the_same_second(tmp_path):
    """Two `--fresh` in one second name the same aside: `mv` would move the home inside the
    first one (and its runs would pull the wrong tree). The second gets -2."""
    import time

    from rgt.lifecycle.launch import prepare_home
    from rgt.store import Box, Run, Store
    from rgt.transport import LocalTransport

    store = Store(tmp_path / "state.db")
    box = Box("box", "local", {}, str(tmp_path), str(tmp_path), None, "up", time.time() - 9)
    store.add_box(box)
    home = tmp_path / "ckpt"
    home.mkdir()
    (home / "w.pt").write_text("first")
    now = time.time()
    for ahead in range(3):  # whatever second the move lands in, its plain name is taken
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + ahead))
        (tmp_path / f"ckpt.before-{stamp}").mkdir()
    store.add_run(Run("r1", "box", "job", str(tmp_path / "r1"), {"ckpt_home": str(home)},
                      "failed", 1, now, now))
    notes = prepare_home(LocalTransport(), str(home), fresh=True, store=store, box=box).notes
    aside = store.run("box", "r1").spec["ckpt_aside"]
    assert aside.endswith("-2") and (Path(aside) / "w.pt").read_text() == "first", aside
    assert any(aside in n for n in notes) and home.is_dir() and not any(home.iterdir())


EXITS_1_ON_SIGTERM = """\
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # torchrun's, accelerate's answer
with open(os.path.join(os.environ["RGT_CKPT_DIR"], "model_state.pth"), "wb") as f:
    f.write(os.urandom(2048))
print("training", flush=True)
while True:
    time.sleep(0.05)
"""


def test_a_stopped_run_pulls_what_exists_names_what_it_never_wrote_and_down_goes(cli,
                                                                                  tmp_path):
    import os
    import signal

    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(EXITS_1_ON_SIGTERM)
    spec = write_job(tmp_path / "job", run="python3 train.py", outputs=["out/final.pt"])
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    run_dir = cli.home / "boxes" / "box" / "scratch" / "rgt" / run_id
    wait_for(lambda: (run_dir / "log").exists() and "training" in (run_dir / "log").read_text()
             and cli.state(run_dir).get("pgid"), timeout=60)
    os.killpg(cli.state(run_dir)["pgid"], signal.SIGTERM)  # a platform's stop notice
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert "stopped" in watched.stdout, watched.stdout + watched.stderr
    report = json.loads(cli.ok("pull", "box", run_id, "--dest", str(tmp_path / "r"),
                               "--json").stdout)["pull"]
    assert report["ok"] and report["run_status"] == "stopped", report
    assert (tmp_path / "r" / "ckpt" / "model_state.pth").is_file()
    assert run_id in report["logs"]
    assert any(w.startswith("out/final.pt: declared, but nothing") and "ended stopped" in w
               for w in report["warnings"]), report["warnings"]
    cli.ok("down", "box", "--yes")
