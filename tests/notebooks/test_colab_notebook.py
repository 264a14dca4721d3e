"""rgt's Colab notebook, executed for real (nbclient + ipykernel) against a stand-in
`google.colab` whose Drive uploads lazily (fake_colab/google/colab/drive.py): a kernel killed
mid-epoch loses nothing that was confirmed, and Run all again resumes bitwise."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from colabkit import RUN_ID, ColabVM, build_notebook, job_spec, kill_when, put_bundle, run_in_thread

from rgt.ckpt import list_checkpoints

torch = pytest.importorskip("torch")
STEPS = 40


def reference_final(tmp_path, spec) -> dict:
    out = tmp_path / "ref"
    subprocess.run([sys.executable, str(spec.workdir / "train_mlp.py"), "--steps", str(STEPS),
                    "--save-every", "5", "--ckpt-dir", str(out / "ckpt"), "--out",
                    str(out / "out")], check=True, capture_output=True, timeout=120)
    return torch.load(out / "out" / "final.pt", weights_only=True)


def same_tensors(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b


def test_killed_mid_epoch_then_run_all_again_resumes_bitwise(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = job_spec(work, steps=STEPS, sleep=0.05)
    vm = ColabVM(tmp_path, delay_s=0.5)
    nb = build_notebook(spec, RUN_ID, put_bundle(vm, spec), heartbeat_s=0.2)

    thread, errors = run_in_thread(vm, nb)
    log = vm.content / "rgt" / RUN_ID / "log.txt"
    kill_when(vm, lambda _view: log.exists() and "step=15 " in log.read_text())
    thread.join(60)
    assert errors and "Dead" in type(errors[0]).__name__, errors
    vm.lose()

    # What survived on Google's side is only what the flush confirmed: at least one
    # checkpoint that verifies (a newer, half-uploaded one may sit there as 0 bytes).
    home = vm.cloud / "rgt" / "jobs" / "mlp" / "ckpt"
    whole = [c for c in list_checkpoints(home, verify=True) if c.ok]
    assert whole and whole[-1].step >= 5, list_checkpoints(home)

    vm.execute(nb)  # Runtime > Run all, in a fresh session
    run_dir = vm.cloud / "rgt" / RUN_ID
    text = (run_dir / "log.txt").read_text()
    assert f"resumed step={whole[-1].step}" in text or "resumed step=" in text, text
    assert "fresh start" in text.split("session 2")[0]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "succeeded" and state["sessions"] == 2 and state["exit_code"] == 0

    got = torch.load(run_dir / "out" / "out" / "final.pt", weights_only=True)
    assert got["step"] == STEPS
    assert same_tensors(got, reference_final(tmp_path, spec))

    lines = [json.loads(x) for x in (run_dir / "MANIFEST.jsonl").read_text().splitlines()]
    files = [x for x in lines if "sha256" in x]
    assert {f["path"] for f in files} == {"out/out/final.pt", "out/out/metrics.json"}
    for f in files:
        assert hashlib.sha256((run_dir / f["path"]).read_bytes()).hexdigest() == f["sha256"]


def test_no_drive_mount_stops_at_the_mount_cell_with_one_clear_line(tmp_path):
    from nbclient.exceptions import CellExecutionError

    work = tmp_path / "work"
    work.mkdir()
    spec = job_spec(work, steps=5, sleep=0)
    vm = ColabVM(tmp_path)
    nb = build_notebook(spec, RUN_ID, put_bundle(vm, spec))
    vm.env["FAKE_DRIVE_CLOUD"] = ""  # the stand-in refuses the way colabtools does off Colab
    with pytest.raises(CellExecutionError) as err:
        vm.execute(nb)
    assert "Google Drive is not mounted" in str(err.value)
    assert "allow access to Drive" in str(err.value)
    assert not (vm.content / "rgt").exists()  # nothing ran, nothing was written
