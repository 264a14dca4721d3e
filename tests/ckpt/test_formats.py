"""rgt.ckpt.formats: each checkpoint format verified by what it is, with real writers
(torch.save, safetensors, torch.distributed.checkpoint), and never executed."""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rgt.ckpt import Checkpointer, formats
from rgt.cli import app

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


class Sneaky:
    """Unpickling this runs code: the marker file proves whether anything executed it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def rng_state(path: Path) -> Path:
    """What HF Trainer writes as rng_state.pth (numpy's RNG state is a pickled ndarray)."""
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                "cpu": torch.random.get_rng_state()}, path)
    return path


def safetensors_file(path: Path) -> Path:
    from safetensors.torch import save_file

    save_file({"a": torch.ones(4, 3), "b": torch.zeros(5, dtype=torch.int64),
               "c": torch.ones(2, dtype=torch.bfloat16)}, str(path))
    return path


def hf_dir(root: Path, step: int, marker: Path) -> Path:
    d = root / f"checkpoint-{step}"
    d.mkdir(parents=True)
    (d / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    (d / "config.json").write_text("{}")
    safetensors_file(d / "model.safetensors")
    torch.save({"state": {}, "param_groups": [{"lr": 0.1, "params": [0]}]}, d / "optimizer.pt")
    rng_state(d / "rng_state.pth")
    torch.save(Sneaky(str(marker)), d / "training_args.bin")
    return d


def test_numpy_rng_state_loads_weights_only(tmp_path: Path) -> None:
    path = rng_state(tmp_path / "rng_state.pth")
    with pytest.raises(Exception, match="[Ww]eights only load failed"):
        torch.load(path, weights_only=True)  # what pull tripped on before
    v = formats.check(path)
    assert v.ok and v.kind == "torch" and v.checked == ("parse", "load"), v
    assert formats.check(path, hashed=True).checked == ("hash", "parse", "load")


def test_code_in_a_pickle_is_reported_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "extra_state.pt"
    torch.save({"step": 9, "obj": Sneaky(str(marker))}, path)
    v = formats.check(path, hashed=True)
    assert v.ok and v.checked == ("hash", "parse") and v.step == 9
    assert "hash-verified, not unpickled" in v.note and "pathlib" in v.note
    args = tmp_path / "training_args.bin"
    torch.save(Sneaky(str(marker)), args)
    v = formats.check(args)
    assert v.ok and "not unpickled" in v.note and "TrainingArguments" in v.note
    assert not marker.exists()


def test_truncated_torch_and_lightning_files_are_caught(tmp_path: Path) -> None:
    path = tmp_path / "epoch=1-step=42.ckpt"
    torch.save({"global_step": 42, "epoch": 1, "state_dict": {"w": torch.ones(100)},
                "pytorch-lightning_version": "2.6.6"}, path)
    v = formats.check(path)
    assert v.ok and v.kind == "lightning" and v.step == 42 and "load" in v.checked
    assert formats.parse_torch_file(path).ints == {"global_step": 42, "epoch": 1}
    os.truncate(path, path.stat().st_size - 200)
    v = formats.check(path)
    assert not v.ok and "truncated" in v.note and v.step == 42  # the name still says which


def test_safetensors_header_and_ranges(tmp_path: Path) -> None:
    path = safetensors_file(tmp_path / "model.safetensors")
    v = formats.check(path)
    assert v.ok and v.checked == ("parse",) and "3 tensor byte ranges" in v.note
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xde\xad\xbe\xef" * 4 + data[16:])  # the overwritten header
    assert "header length" in formats.check(garbage).note
    not_json = tmp_path / "notjson.safetensors"
    not_json.write_bytes(data[:8] + b"x" * length + data[8 + length:])
    assert "not JSON" in formats.check(not_json).note
    short = tmp_path / "short.safetensors"
    short.write_bytes(data[:-4])
    assert not formats.check(short).ok
    header = json.loads(data[8:8 + length])
    header["a"]["shape"] = [4, 4]  # claims more bytes than its range holds
    raw = json.dumps(header, separators=(",", ":")).encode().ljust(length)
    assert len(raw) == length
    lying = tmp_path / "lying.safetensors"
    lying.write_bytes(data[:8] + raw + data[8 + length:])
    assert "needs" in formats.check(lying).note


def test_hf_checkpoint_dir_is_one_checkpoint(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    d = hf_dir(tmp_path / "out", 7, marker)
    v = formats.check(d)
    assert v.ok and v.kind == "hf-checkpoint" and v.step == 7, v.note
    assert {p.path.name for p in v.parts} >= {"model.safetensors", "rng_state.pth"}
    assert "not unpickled: training_args.bin" in v.note and not marker.exists()
    (d / "model.safetensors").unlink()
    assert "no model weights" in formats.check(d).note
    safetensors_file(d / "model.safetensors")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 8}))
    assert "directory name 7" in formats.check(d).note


def test_dcp_dir(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    d = tmp_path / "step_300"
    with pytest.warns(UserWarning):
        dcp.save({"w": torch.ones(3)}, checkpoint_id=str(d))
    v = formats.check(d)
    assert v.ok and v.kind == "dcp" and v.step == 300, v.note
    next(d.glob("*.distcp")).unlink()
    assert "missing" in formats.check(d).note


def test_find_and_cli(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hf_dir(tmp_path / "hf", 3, marker)
    hf_dir(tmp_path / "hf", 6, marker)
    logs = tmp_path / "lightning_logs" / "version_0" / "checkpoints"
    logs.mkdir(parents=True)
    torch.save({"global_step": 12, "epoch": 0, "state_dict": {}}, logs / "epoch=0-step=12.ckpt")
    Checkpointer(tmp_path / "rgt").save({"w": torch.ones(2)}, 5)
    found = formats.find(tmp_path)
    assert [p.name for p in found] == ["checkpoint-3", "ckpt-0000000005.pt", "checkpoint-6",
                                       "epoch=0-step=12.ckpt"]
    runner = CliRunner()
    r = runner.invoke(app, ["ckpt", "ls", str(tmp_path)], env=ENV)
    assert r.exit_code == 0, r.output
    rows = {ln.split()[1]: ln for ln in r.output.splitlines() if ln.startswith("│")}
    assert set(rows) == {"3", "5", "6", "12"}
    assert "hf-checkpoint" in rows["6"] and "lightning" in rows["12"] and "yes" in rows["12"]
    r = runner.invoke(app, ["ckpt", "verify", str(tmp_path / "hf" / "checkpoint-6")], env=ENV)
    assert r.exit_code == 0 and "step=6" in r.output and "loads=yes" in r.output, r.output
    r = runner.invoke(app, ["ckpt", "verify", str(tmp_path / "hf" / "checkpoint-6" /
                                                 "trainer_state.json")], env=ENV)
    assert r.exit_code == 0 and "kind=json" in r.output  # no longer taken for a sidecar
    with open(tmp_path / "hf" / "checkpoint-6" / "model.safetensors", "r+b") as f:
        f.write(b"\xff" * 8)
    r = runner.invoke(app, ["ckpt", "verify", str(tmp_path / "hf" / "checkpoint-6")], env=ENV)
    assert r.exit_code == 1 and "DAMAGED" in r.output and "header length" in r.output
    assert not marker.exists()


def test_messages_are_clean_short_and_said_once() -> None:
    raw = "Weights only load failed. \x1b[1mdo those steps only if you trust\x1b[0m the source " \
          + "word " * 60
    text = formats.clean(raw, 80)
    assert "\x1b" not in text and len(text) <= 82 and text.endswith(" …")
    assert not text[:-2].endswith("wor")  # cut at a word boundary
    lines = formats.said_once([(f"c-{i}/rng_state.pth", "refused") for i in range(12)]
                              + [("x.pt", "other")])
    assert lines == ["12 files: refused (c-0/rng_state.pth, c-1/rng_state.pth, "
                     "c-2/rng_state.pth and 9 more)", "x.pt: other"]


def test_a_raw_data_bin_is_data_but_a_damaged_torch_bin_is_caught(tmp_path: Path) -> None:
    # nanoGPT writes its tokens as a raw uint16 memmap named train.bin: data, not a checkpoint
    tokens = tmp_path / "train.bin"
    np.arange(1000, dtype=np.uint16).tofile(tokens)
    verdict = formats.check(tokens, hashed=True)
    assert verdict.ok and verdict.kind == "other" and "raw .bin data" in verdict.note
    saved = tmp_path / "weights.bin"
    torch.save({"w": torch.ones(3)}, saved)
    assert formats.check(saved).ok and formats.check(saved).kind == "torch"
    # a torch file cut short still begins as a zip, and an HF weights file must be torch
    cut = tmp_path / "cut.bin"
    cut.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    hf = tmp_path / "pytorch_model.bin"
    hf.write_bytes(b"not weights at all")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    for damaged in (cut, hf, empty):
        verdict = formats.check(damaged)
        assert not verdict.ok and verdict.kind == "torch", (damaged.name, verdict)


def accelerate_dir(root: Path, name: str, marker: Path) -> Path:
    """What accelerate's save_state writes (its file names and formats), its RNG pickle
    carrying code that would touch MARKER if anything unpickled it."""
    path = root / name
    path.mkdir(parents=True)
    safetensors_file(path / "model.safetensors")
    torch.save({"state": {}, "param_groups": [{"lr": 0.1, "params": [0]}]},
               path / "optimizer.bin")
    torch.save({"step_size": 10, "last_epoch": 3}, path / "scheduler.bin")
    torch.save({"step": 0, "random_state": random.getstate(), "sneaky": Sneaky(str(marker))},
               path / "random_states_0.pkl")
    return path


def test_accelerate_state_dir_is_one_checkpoint_its_pickle_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    whole = formats.check(accelerate_dir(tmp_path, "checkpoint_7", marker))
    assert (whole.kind, whole.step, whole.ok) == ("accelerate", 7, True), whole.note
    rng = next(p for p in whole.parts if p.path.name == "random_states_0.pkl")
    assert rng.kind == "pickle" and rng.checked == ("parse",) and rng.loaded is None
    assert not marker.exists()
    assert formats.find(tmp_path) == [tmp_path / "checkpoint_7"]
    # any damaged file damages the unit, the RNG pickle's too
    cut = accelerate_dir(tmp_path, "step_20", marker) / "random_states_0.pkl"
    os.truncate(cut, cut.stat().st_size // 2)
    damaged = formats.check(cut.parent)
    assert not damaged.ok and damaged.step == 20 and "random_states_0.pkl" in damaged.note
    # a save cut short before its RNG states (accelerate writes them last) did not complete
    cut.unlink()
    unfinished = formats.check(cut.parent)
    assert unfinished.kind == "accelerate" and not unfinished.ok
    assert "no random_states_N.pkl" in unfinished.note
    assert not marker.exists()
