"""`rgt verify BOX [RUN]` (issue 29 item 5): the README's lifecycle names `verify` between pull
and down, and it was "No such command". It checks a pull again on the laptop, against the
box's manifests the pull kept with its evidence — no box: this one is down by then."""

from __future__ import annotations

import json

from boxkit import write_job

# out/w.bin and a safetensors checkpoint (checked by its header, no torch needed) in the home
WRITE = ("mkdir -p out && echo weights > out/w.bin && python -c \"import json, os, struct; "
         "h = json.dumps({'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}).encode(); "
         "open(os.environ['RGT_CKPT_DIR'] + '/model-00000003.safetensors', 'wb').write("
         "struct.pack('<Q', len(h)) + h + bytes(8))\"")


def test_verify_rechecks_a_pull_without_the_box(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run=WRITE, outputs=["out"],
                     checkpoint_dir="$RGT_CKPT_DIR")
    run_id = cli.ok("run", "box", str(spec), "-d").stdout.strip().splitlines()[-1]
    never = cli("verify", "box", run_id)
    assert never.returncode == 2 and f"was never pulled: `rgt pull box {run_id}`" in never.stderr
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    dest = tmp_path / "results"
    cli.ok("pull", "box", run_id, "--dest", str(dest))
    cli.ok("down", "box", "--yes")  # the box is gone: verify reads only the laptop

    again = cli.ok("verify", "box", run_id, "--json")
    report = json.loads(again.stdout)["verify"]
    assert report["ok"] and report["counts"]["files"] == 2, report
    weights = {f["path"]: f for f in report["files"]}["ckpt/model-00000003.safetensors"]
    assert weights["sha256_ok"] and weights["loads"] and "parse" in weights["checked"], weights
    assert "verified again 2 files" in cli.ok("verify", "box").stdout

    (dest / "out" / "w.bin").write_text("weights, edited\n")  # a sync client, a script …
    changed = cli("verify", "box", run_id)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "out/w.bin: hash or size differs from the box's manifest" in changed.stderr
    assert f"`rgt pull box {run_id}` fetches the run again" in changed.stderr

    manifest = cli.home / "evidence" / "box" / run_id / "manifests" / "PULL_MANIFEST.jsonl"
    manifest.write_text(manifest.read_text().replace("weights", "weights"))  # unchanged
    (dest / "out" / "w.bin").write_text("weights\n")
    assert cli("verify", "box", run_id).returncode == 0
    manifest.unlink()  # the evidence itself lost
    lost = cli("verify", "box", run_id)
    assert lost.returncode == 1 and "not the ones it verified against" in lost.stderr

    for path in sorted(dest.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    dest.rmdir()
    gone = cli("verify", "box", run_id)
    assert gone.returncode == 2 and f"is gone from {dest}" in gone.stderr
    assert "Traceback" not in gone.stderr + lost.stderr + changed.stderr

    dest.mkdir()  # (the evidence is read before the pulled files)
    evidence = cli.home / "evidence" / "box" / run_id
    files = evidence / "PULL_FILES.jsonl"
    files.write_text(files.read_text()[:-7])  # rgt's own evidence, cut mid-line
    cut = cli("verify", "box", run_id)
    assert cut.returncode == 2 and "damaged file list" in cut.stderr, cut.stderr
    (evidence / "PULL_VERIFIED.json").write_text("{\"dest\": ")
    garbled = cli("verify", "box", run_id)
    assert garbled.returncode == 2 and "PULL_VERIFIED.json) is damaged" in garbled.stderr
    assert "Traceback" not in cut.stderr + garbled.stderr
