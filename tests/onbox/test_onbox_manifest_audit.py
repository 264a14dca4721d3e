"""manifest.py (PULL_MANIFEST.json evidence) and audit.py (pre-run box audit)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys

from onbox_helpers import feed, shipped

from rgt.onbox import audit


def read_jsonl(path):
    """A manifest (JSON Lines: header, one line per file, end record) as one dict."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["manifest_version"] == 2 and lines[-1]["end"] is True
    return {**lines[0], **lines[-1], "files": lines[1:-1]}


def make_outputs(root):
    (root / "ckpt").mkdir(parents=True)
    (root / "ckpt" / "best.pt").write_bytes(os.urandom(3 * 1024 * 1024 + 17))  # > 1 buffer
    (root / "ckpt" / "nested").mkdir()
    (root / "ckpt" / "nested" / "latest.pt").write_bytes(os.urandom(1000))
    (root / "metrics.json").write_text('{"acc": 0.9}')
    (root / "empty.txt").write_bytes(b"")
    (root / "ignored.log").write_text("not declared")


def test_manifest_via_stdin_hashes_match_and_missing_is_listed(tmp_path):
    root = tmp_path / "run"
    make_outputs(root)
    elsewhere = tmp_path / "elsewhere.bin"
    elsewhere.write_bytes(b"abc")
    out_json = root / "PULL_MANIFEST.json"
    patterns = ["ckpt", "*.json", "empty.txt", "samples/**/*.png", str(elsewhere)]
    proc = feed("manifest", str(root), str(out_json), *patterns)
    assert proc.returncode == 2, proc.stderr  # written, but a declared output is missing
    summary = json.loads(proc.stdout)
    manifest = read_jsonl(out_json)
    assert manifest["missing"] == ["samples/**/*.png"] == summary["missing"]

    expected = {
        rel: root / rel
        for rel in ("ckpt/best.pt", "ckpt/nested/latest.pt", "metrics.json", "empty.txt")
    }
    expected[str(elsewhere)] = elsewhere
    got = {f["path"]: f for f in manifest["files"]}
    assert set(got) == set(expected)  # not the manifest itself, not undeclared files
    for rel, path in expected.items():
        data = path.read_bytes()
        assert got[rel]["bytes"] == len(data), rel
        assert got[rel]["sha256"] == hashlib.sha256(data).hexdigest(), rel
    assert manifest["total_bytes"] == sum(f["bytes"] for f in manifest["files"])
    assert manifest["root"] == str(root) and manifest["host"] and manifest["created"] > 0
    assert not [p for p in os.listdir(root) if p.endswith(".tmp")]


def test_manifest_complete_exits_zero(tmp_path):
    root = tmp_path / "run"
    make_outputs(root)
    out_json = tmp_path / "m" / "PULL_MANIFEST.json"
    proc = subprocess.run(
        [sys.executable, str(shipped("manifest", tmp_path)), str(root), str(out_json), "ckpt/*.pt"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    files = read_jsonl(out_json)["files"]
    assert [f["path"] for f in files] == ["ckpt/best.pt"]


def test_audit_flags_a_nearly_inode_full_tier(tmp_path, tmpfs):
    full = tmpfs("size=16m,nr_inodes=16")
    for i in range(14):  # root dir + 14 files = 15 of 16 inodes
        (full / f"f{i}").write_text("x")
    roomy = tmp_path / "roomy"
    roomy.mkdir()
    hf = tmp_path / "hf"
    (hf / "hub" / "models--big").mkdir(parents=True)
    (hf / "hub" / "models--big" / "blob").write_bytes(os.urandom(2 * 1024 * 1024))
    (hf / "hub" / "models--small").mkdir()
    (hf / "hub" / "models--small" / "blob").write_bytes(os.urandom(64 * 1024))

    args = ["--dirs", str(full), str(roomy), "--py", sys.executable, "--hf-cache", str(hf)]
    proc = feed("audit", *args, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    full_disk, roomy_disk = report["dirs"]
    assert full_disk["inodes_total"] == 16 and full_disk["inodes_pct"] >= 90
    fails = [v for v in report["verdicts"] if v["level"] == "fail"]
    assert any(v["id"] == "AD4/U7" and str(full) in v["message"] for v in fails)
    assert not any(str(roomy) in v["message"] for v in fails)
    assert report["overall"] == "fail"

    assert report["nproc"] >= 1 and report["ram_total"] > 0
    assert report["python"]["ran"] is True
    assert report["python"]["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    try:  # the same interpreter, asked without importing torch here
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        assert report["python"]["torch"] is None
    else:
        assert report["python"]["torch"] == torch_version
        assert report["python"]["cuda_available"] in (True, False)
    top = [os.path.basename(e["path"]) for e in report["hf_cache"]["top"]]
    assert top[:2] == ["models--big", "models--small"]
    assert report["hf_cache"]["top"][0]["bytes"] >= 2 * 1024 * 1024
    assert "present" in report["gpus"]


def test_audit_verdicts_thresholds():
    disk = {"exists": True, "inodes_total": 100, "inodes_free": 5, "bytes_free": 10}
    report = {
        "dirs": [
            dict(disk, path="/inodes", inodes_pct=95.0, bytes_pct=10.0),
            dict(disk, path="/bytes", inodes_pct=10.0, bytes_pct=92.0),
            dict(disk, path="/fine", inodes_pct=10.0, bytes_pct=10.0),
        ],
        "cgroup": {"memory_max": 4 * 1024**3, "cpu_quota_cores": 2.0},
        "nproc": 64,
        "gpus": {"present": False, "error": "nvidia-smi not found"},
        "python": {"ran": True, "executable": "python3", "torch": None, "error": "no torch"},
    }
    got = {(v["level"], v["id"], v["message"].split(":")[0]) for v in audit.verdicts(report)}
    assert ("fail", "AD4/U7", "/inodes") in got
    assert ("warn", "U6", "/bytes") in got
    assert ("ok", "AD4/U7", "/fine") in got and ("ok", "U6", "/fine") in got
    levels = {(v["level"], v["id"]) for v in audit.verdicts(report)}
    assert {("warn", "U9/U41"), ("warn", "U40"), ("warn", "U31"), ("warn", "U28")} <= levels
    report["gpus"] = {
        "present": True,
        "devices": [{"name": "H100"}],
        "driver": "550",
        "cuda": "12.4",
    }
    report["python"] = {"ran": True, "torch": "2.4.0", "cuda_available": False}
    assert ("fail", "U28/U31") in {(v["level"], v["id"]) for v in audit.verdicts(report)}


def test_audit_runs_a_kernel_before_calling_torch_cuda_ok():
    """torch.cuda.is_available() is True on a GPU whose architecture the torch build lacks
    (an RTX 5090's sm_120 under a cu124 torch): the first kernel then fails. The audit's word
    "sees CUDA" was printed on is_available() alone."""
    base = {"dirs": [], "cgroup": {}, "nproc": 8,
            "gpus": {"present": True, "devices": [{"name": "RTX 5090"}], "driver": "570"}}
    sm90 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]

    def said(**python) -> set:
        report = dict(base, python={"ran": True, "torch": "2.5.1", "torch_cuda": "12.4",
                                    "cuda_available": True, **python})
        return {(v["level"], v["id"], v["message"]) for v in audit.verdicts(report)}
    lacking = said(capability="sm_120", arch_list=sm90, kernel_ok=False, kernel_error=(
        "RuntimeError: CUDA error: no kernel image is available for execution on the device"))
    assert [m for lvl, i, m in lacking if (lvl, i) == ("fail", "U28/U31")
            and "no kernels for this GPU's sm_120" in m and "sm_90" in m], lacking
    assert not [m for lvl, i, m in lacking if (lvl, i) == ("ok", "U28")]
    busy = said(capability="sm_90", arch_list=sm90, kernel_ok=False, kernel_error=(
        "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"))
    assert {(lvl, i) for lvl, i, _ in busy} >= {("warn", "U11")}
    ran = said(capability="sm_90", arch_list=sm90, kernel_ok=True)
    assert ("ok", "U28", "torch 2.5.1 sees CUDA, and a kernel ran on its sm_90") in ran
