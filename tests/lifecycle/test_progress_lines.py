"""Progress from the lines trainers print (issue 33, item 8): `[ep 0] it 80/200 | train_loss
0.03` is step 80 of 200 in epoch 0 (an ETA once a rate is known), PyTorch's DDP example's
`[GPU0] Epoch 3 | Batchsize: 32 | Steps: 63` is epoch 3 of 63-step epochs, and neither the
epoch nor the step is plotted as a metric of its own."""

from __future__ import annotations

from boxkit import write_job

from rgt.lifecycle import progress
from rgt.lifecycle.metrics import to_series
from rgt.lifecycle.untrusted import read_metric_log
from rgt.onbox.probe import parse_metrics, parse_progress
from rgt.remote import summary


def _facts(line: str) -> dict:
    log = {"metrics": parse_metrics(line), "progress": parse_progress(line)}
    return summary.training({key: value for key, value in log.items() if value})


def test_an_iteration_count_of_a_total_gives_an_eta():
    info = _facts("[ep 0] it 80/200 | train_loss 0.03")
    assert (info["step"], info["total"], info["epoch"]) == (80, 200, 0)
    assert progress.describe(info) == "step 80/200 · train_loss 0.03 · epoch 0"
    timed = progress.with_rate(info, [(100.0, 40), (120.0, 80)])  # two probes, 20 s apart
    assert progress.describe(timed) == "step 80/200 · train_loss 0.03 · epoch 0 · 2 steps/s " \
                                       "· ETA 1m00s"
    assert "ETA" not in progress.describe(timed, live=False)
    both = _facts("epoch 2/10 step 5/100 loss 1.0")
    assert (both["epochs"], both["total"]) == (10, 100)
    assert "epoch 2/10" in progress.describe(both)


def test_ddp_examples_epoch_lines_are_progress():
    info = _facts("[GPU0] Epoch 3 | Batchsize: 32 | Steps: 63")
    assert (info["epoch"], info["epoch_steps"], info["step"]) == (3, 63, 189)  # 3 epochs done
    assert "total" not in info and "eta_s" not in progress.with_rate(info, [])
    assert progress.describe(info) == "step 189 · epoch 3"
    known = progress.with_rate(_facts("[GPU1] Epoch 4/10 | Batchsize: 32 | Steps: 63"),
                               [(0.0, 189), (63.0, 252)])
    assert progress.describe(known) == "step 252/630 · epoch 4/10 · 1 steps/s · ETA 6m18s"
    assert parse_progress("Epoch 3 | lr 0.1") is None  # no Steps: not DDP's line


def test_the_epoch_is_not_plotted_as_a_metric():
    lines = [f"[ep {e}] it {i}/200 | train_loss {1 / (1 + 200 * e + i):.4f}"
             for e in range(2) for i in range(0, 200, 50)]
    x_label, series = to_series(read_metric_log("\n".join(lines).encode()))
    assert x_label == "step" and set(series) == {"train_loss"}
    hf = read_metric_log(b"{'loss': 2.0, 'epoch': 0.5}\n{'loss': 1.0, 'epoch': 1.0}\n")
    assert to_series(hf) == ("epoch", {"loss": [(0.5, 2.0), (1.0, 1.0)]})


def test_watch_top_and_plot_read_the_trainers_lines(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run=(
        "echo '[GPU0] Epoch 0 | Batchsize: 32 | Steps: 200'; "
        "for i in 40 80; do echo \"[ep 0] it $i/200 | train_loss 0.0$((i / 40))\"; done"))
    run_id = cli.ok("run", "box", str(spec)).stdout.strip().splitlines()[-1]
    watched = cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "step 80/200 · train_loss 0.02 · epoch 0" in watched.stdout
    top = cli.ok("top", "--once", env={"COLUMNS": "120"}).stdout
    assert "step 80/200 · train_loss 0.02 · epoch 0" in top
    plot = cli.ok("plot", "box", run_id).stdout
    assert "train_loss" in plot and " ep" not in plot
