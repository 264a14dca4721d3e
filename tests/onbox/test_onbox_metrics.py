"""Metrics from the trainers' own logs, read on the box by the probe: HF dict lines, JSON lines,
`iter N: loss X` / `step N loss X` text, tqdm bars, Lightning's metrics.csv — and lines that
are not metrics (checkpoint names, settings, banners) never taken for one."""

from __future__ import annotations

import os
import time

import pytest

from rgt.onbox import probe


@pytest.mark.parametrize(("line", "step", "loss"), [
    ("{'loss': '2.136', 'grad_norm': '1.2', 'learning_rate': '4e-05', 'epoch': 0.5}", None,
     2.136),  # transformers 5 quotes its values
    ("{'loss': 2.5, 'epoch': 1.0}", None, 2.5),
    ('{"step": 10, "loss": 1.5}', 10, 1.5),
    ("iter 100: loss 2.1234, time 45.21ms, mfu 12.50%", 100, 2.1234),
    ("step 120 loss 0.431 lr 0.003", 120, 0.431),
    ("step=120 loss=0.4312 lr=0.00291", 120, 0.4312),
    ("Step 5/100 | loss: 1.25 | acc: 0.5", 5, 1.25),
])
def test_metric_lines(line, step, loss):
    found = probe.parse_metrics(line)
    assert found is not None and found.get("step") == step and found["loss"] == loss


@pytest.mark.parametrize("line", [
    "Epoch 3: saving model to epoch=3-step=1000.ckpt",
    "/ckpt/epoch=3-step=1000.ckpt",
    "starting: lr=3e-4 batch_size=32 steps=1000 seed=0",
    "GPU available: False, used: False",
    "val_loss=nan",
    "[rgt] exit=0 status=succeeded",
    "{'model_type': 'gpt2', 'n_layer': 1}",
])
def test_lines_that_are_not_metrics(line):
    assert probe.parse_metrics(line) is None


def test_tqdm_bars():
    assert probe.parse_progress(" 67%|███   | 4/6 [00:01<00:00,  5.02it/s]") == {
        "rate": 5.02, "step": 4, "total": 6, "eta_s": 0}
    assert probe.parse_progress("  2%|▏ | 3/120 [00:06<03:54,  2.00s/it]")["rate"] == 0.5
    assert probe.parse_progress("Writing model shards: 100%|██| 1/1 [00:00<00:00, 9.1it/s]") \
        is None  # not the training bar
    lightning = probe.parse_progress("Epoch 0:  50%|█  | 4/8 [00:01<00:01, 3.20it/s, v_num=0]")
    assert lightning == {"rate": 3.2}  # its count is the epoch's batches, not steps


def test_log_facts_keep_the_last_metric_not_a_later_file_name(tmp_path):
    log = tmp_path / "log"
    log.write_text("\n".join([
        "{'loss': '3.1', 'epoch': 0.1}",
        "\r 10%|█   | 3/30 [00:03<00:29,  1.10s/it]\r{'loss': '2.9', 'epoch': 0.2}",
        "saved epoch=0-step=3.ckpt",
        "\r 13%|█▎  | 4/30 [00:05<00:35,  1.37s/it]",
    ]) + "\n")
    facts = probe.log_facts(str(log))
    assert facts["metrics"]["loss"] == 2.9
    assert facts["progress"]["step"] == 4 and facts["progress"]["total"] == 30


def test_lightning_csv_and_checkpoint_names(tmp_path):
    logs = tmp_path / "code" / "lightning_logs" / "version_0"
    logs.mkdir(parents=True)
    (logs / "metrics.csv").write_text(
        "epoch,step,train_loss,val_loss\n0,1,1.5,\n0,3,1.25,\n0,3,,1.1\n")
    found = probe.csv_metrics([str(tmp_path / "code")])
    assert found["step"] == 3 and found["values"]["val_loss"] == 1.1
    assert found["source"] == "lightning_logs/version_0/metrics.csv"
    home = tmp_path / "ckpt"
    (home / "checkpoint-500").mkdir(parents=True)
    (home / "checkpoint-500" / "trainer_state.json").write_text("{}")
    (home / "epoch=1-step=9.ckpt").write_text("x")
    old = time.time() - 100
    os.utime(home / "checkpoint-500", (old, old))
    os.utime(home / "checkpoint-500" / "trainer_state.json", (old, old))
    names = [e["name"] for e in probe.checkpoint_entries(str(home))]
    assert names[0] == "epoch=1-step=9.ckpt" and "checkpoint-500/trainer_state.json" in names
