"""The watch line (rgt.lifecycle.progress over rgt.remote.summary's facts) and the
save-on-SIGTERM hints (save_hints)."""

from __future__ import annotations

import json

from rgt.lifecycle import progress, save_hints
from rgt.remote import summary


def test_watch_line_and_last_checkpoint():
    info = summary.training({
        "metrics": {"loss": 2.136, "loss_key": "loss", "epoch": 0.5},
        "progress": {"step": 120, "total": 1000, "rate": 5.0, "eta_s": 176},
        "csv_metrics": None})
    assert progress.describe(info) == \
        "step 120/1000 · loss 2.136 · epoch 0.5 · 5 steps/s · ETA 2m56s"
    assert "ETA" not in progress.describe(info, live=False)
    csv = summary.training({"csv_metrics": {"step": 90, "loss": 1.0, "loss_key": "train_loss",
                                             "source": "lightning_logs/version_0/metrics.csv"}})
    timed = progress.with_rate(csv, [(100.0, 10), (120.0, 90)])
    assert progress.describe(timed) == "step 90 · train_loss 1 · 4 steps/s"
    entries = [{"name": "checkpoint-1500/rng_state.pth", "mtime": 9, "dir": False},
               {"name": "runs", "mtime": 8, "dir": True},
               {"name": "checkpoint-1000", "mtime": 7, "dir": True}]
    assert summary.last_checkpoint(entries)["step"] == 1500
    assert summary.stop_line({"stop_signal": "SIGTERM",
                               "last_checkpoint": summary.last_checkpoint(entries)}) == \
        "stopped by SIGTERM, last checkpoint step 1500 (checkpoint-1500)"
    assert summary.last_checkpoint([{"name": "metrics.json", "mtime": 1, "dir": False}]) is None


def test_save_hints_name_what_will_not_save(tmp_path):
    (tmp_path / "hf.py").write_text("from transformers import Trainer\nTrainer(model=m)\n")
    (tmp_path / "pl.py").write_text("import lightning as L\nL.Trainer(max_steps=9)\n")
    (tmp_path / "plain.py").write_text("import torch\ntorch.save(m.state_dict(), 'x.pt')\n")
    (tmp_path / "ok.py").write_text("from transformers import Trainer\n"
                                    "from rgt.ckpt.hf import SaveOnSignal\n"
                                    "Trainer(callbacks=[SaveOnSignal()])\n")
    hints = {h.split(":")[0]: h for h in save_hints.hints(tmp_path, "~5s")}
    assert set(hints) == {"hf.py", "pl.py", "plain.py"}
    assert "SaveOnSignal" in hints["hf.py"] and "~5s" in hints["hf.py"]
    assert "OnExceptionCheckpoint" in hints["pl.py"] and "PreemptionFlag" in hints["plain.py"]
    assert json.dumps(save_hints.hints(tmp_path / "missing")) == "[]"
