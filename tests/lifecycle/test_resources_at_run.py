"""A spec's resources are checked wherever a run starts (issue 29 item 1): on a box that is one
machine, `rgt run` and `--dry-run` measure it (nvidia-smi, cpus, memory, free disk) and refuse
by name what it lacks, before anything is pushed; nodes above 1 and TPUs are refused; the
override is recorded with the run."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest
from boxkit import write_job


@pytest.fixture
def two_a100s(tmp_path):
    """An nvidia-smi on PATH that answers as a box with two A100s would."""
    bin_dir = tmp_path / "fake-gpu-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA A100-SXM4-80GB'\necho 'NVIDIA A100-SXM4-80GB'\n")
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def refused(cli, spec, *flags, env=None) -> str:
    result = cli("run", "box", str(spec), "-d", *flags, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    return result.stderr


def test_what_the_box_lacks_is_refused_before_the_push(cli, tmp_path, two_a100s):
    cli.ok("up", "box")
    root = cli.home / "boxes" / "box" / "scratch" / "rgt"
    cases = [({"gpu": "A100:1"}, None, "resources.gpu A100:1: box has no GPU"),
             ({"gpu": "H100:1"}, two_a100s, "has 2× NVIDIA A100-SXM4-80GB"),
             ({"gpu": "A100:4"}, two_a100s, "has 2× NVIDIA A100-SXM4-80GB"),
             ({"nodes": 2}, None, "resources.nodes 2: box (local) is one machine"),
             ({"gpu": "tpu-v2-8"}, None, "is a TPU"),
             ({"disk": "900T"}, None, "resources.disk 900T: box has"),
             ({"cpus": 4096}, None, "resources.cpus 4096: box has")]
    for resources, env, said in cases:
        spec = write_job(tmp_path / "job", run="sleep 30", resources=resources)
        assert said in refused(cli, spec, env=env)
        assert said in refused(cli, spec, "--dry-run", env=env)
    assert not root.exists() or not list(root.iterdir()), "nothing pushed"
    assert json.loads(cli.ok("runs", "--json").stdout)["runs"] == []
    render = cli("render", str(spec_with(tmp_path, gpu="tpu-v2-8")), "--profile", "slurm")
    assert render.returncode == 2 and "is a TPU" in render.stderr


def spec_with(tmp_path, **resources):
    return write_job(tmp_path / "job", run="sleep 30", resources=resources)


def test_what_fits_is_shown_checked_and_the_override_is_recorded(cli, tmp_path, two_a100s):
    cli.ok("up", "box")
    spec = spec_with(tmp_path, gpu="A100:2", disk="1M", image="pytorch/pytorch:2.4.0")
    plan = cli.ok("run", "box", str(spec), "--dry-run", env=two_a100s).stdout
    assert "gpu A100:2 ✓ (2× NVIDIA A100-SXM4-80GB, measured now)" in plan
    assert "disk 1M ✓" in plan and "not checkable on a running machine: image" in plan
    lacking = spec_with(tmp_path, gpu="A100:1")
    run_id = cli.ok("run", "box", str(lacking), "-d", "--skip-resource-check"
                    ).stdout.strip().splitlines()[-1]
    db = sqlite3.connect(cli.home / "state.db")
    [spec_json] = db.execute("SELECT spec FROM runs WHERE id=?", (run_id,)).fetchone()
    db.close()
    assert json.loads(spec_json)["resources_check"]["skipped"] is True
    cli.ok("cancel", "box", run_id, "--yes", "--grace", "1")


def test_memory_is_measured_where_there_is_no_proc_meminfo(tmp_path, monkeypatch):
    """A Mac (the `local` box of a Mac laptop) has no /proc/meminfo: the measurement falls back
    to sysctl's hw.memsize. Played here by an awk for which /proc/meminfo is missing."""
    from types import SimpleNamespace

    from rgt.lifecycle import fit
    from rgt.transport.local import LocalTransport

    bin_dir = tmp_path / "mac-bin"
    bin_dir.mkdir()
    real_awk = shutil.which("awk")
    (bin_dir / "awk").write_text(  # awk as on a Mac: /proc/meminfo is not there
        '#!/bin/sh\ncase "$*" in */proc/meminfo*) echo "awk: cannot open file" >&2; exit 2;; '
        f'esac\nexec {real_awk} "$@"\n')
    (bin_dir / "sysctl").write_text('#!/bin/sh\n[ "$2" = hw.memsize ] && echo 17179869184\n')
    for tool in ("awk", "sysctl"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    facts = fit.measure(LocalTransport(), SimpleNamespace(data_dir=str(tmp_path / "data")))
    assert facts["mem_kb"] == 16 * 1024 * 1024, facts
    assert facts["cpus"] >= 1 and facts["disk_free_kb"] > 0, facts
