"""Files move on stock machines (issue 19, cases 1–4): a Mac laptop (no os.waitid, no /proc),
macOS's own old rsync, a laptop with no rsync at all, and a box image with no rsync.

Each runs the real command line against a real box: the local profile, or the real sshd on
127.0.0.1 (a system user whose PATH sshd sets, for the box without rsync).
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from boxkit import verified_in, write_job
from laptops import OLD_RSYNC, Laptop, old_rsync_dir, path_without
from stockbox import stock_box  # noqa: F401  (fixture)

JOB = ("for i in 1 2 3; do echo step=$i loss=0.$i; sleep 0.2; done\n"
       "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json && head -c 300000 /dev/urandom"
       " > out/w.bin")


def workdir(tmp_path):
    """A job whose workdir holds a bigger file and a few small ones, so a push moves data."""
    spec = write_job(tmp_path / "job", run=JOB, outputs=["out"])
    (spec.parent / "data.bin").write_bytes(os.urandom(2_000_000))
    (spec.parent / "pkg").mkdir()
    for i in range(20):
        (spec.parent / "pkg" / f"m{i}.py").write_text(f"X = {i}\n")
    return spec


def assert_clean(result):
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert "Traceback" not in text and "unknown option" not in text, text


def run_and_pull(cli, box, spec, dest):
    """run → watch → pull on BOX; the pulled outputs must match the box's manifest."""
    launched = cli("run", box, str(spec))
    assert_clean(launched)
    run_id = launched.stdout.strip().splitlines()[-1]
    assert_clean(cli("watch", box, run_id, "--until-done", "--timeout", "90"))
    assert_clean(cli("pull", box, run_id, "--dest", str(dest)))
    verified = cli.verified(box, run_id)
    assert verified["ok"], verified["problems"]
    assert json.loads((dest / "out" / "metrics.json").read_text()) == {"acc": 0.9}
    assert (dest / "out" / "w.bin").stat().st_size == 300_000
    return run_id


def up_ssh(cli, server, tmp_path, name):
    t = server.target
    assert_clean(cli("up", name, "--profile", "generic-ssh", "--ssh",
                     f"ssh -p {t.port} -i {t.identity} root@{t.host}",
                     "--data-dir", str(tmp_path / f"{name}-data"),
                     "--durable-dir", str(tmp_path / f"{name}-durable")))


def test_mac_laptop_case_1(tmp_path, sshd_server):
    """Case 1: CPython 3.11/3.12 on macOS has no os.waitid, and the Mac has no /proc and no
    setsid(1); every push and pull used to end in `AttributeError: module 'os' has no
    attribute 'waitid'`, and a local box's run could not detach."""
    mac = Laptop(tmp_path / "home", mac=True)
    seen = mac.command(sys.executable, "-c",
                       "import os, shutil; print(hasattr(os, 'waitid'), "
                       "os.path.exists('/proc/self'), shutil.which('setsid'))")
    assert seen.stdout.split() == ["False", "False", "None"], seen.stdout + seen.stderr

    spec = workdir(tmp_path)
    assert_clean(mac("up", "here"))
    run_and_pull(mac, "here", spec, tmp_path / "pulled-local")
    assert_clean(mac("down", "here", "--yes"))

    up_ssh(mac, sshd_server, tmp_path, "far")
    run_and_pull(mac, "far", spec, tmp_path / "pulled-ssh")
    pushed = next((tmp_path / "far-data").glob("rgt/*/code"))
    assert (pushed / "data.bin").read_bytes() == (spec.parent / "data.bin").read_bytes()


@pytest.mark.parametrize("flavor", sorted(OLD_RSYNC))
def test_stock_macos_rsync_case_2(tmp_path, sshd_server, flavor):
    """Case 2: macOS's own rsync (2.6.9; openrsync on macOS 15) first on PATH used to fail
    every transfer with `rsync: --info=progress2: unknown option`."""
    shims = old_rsync_dir(tmp_path / "old-rsync", flavor)
    laptop = Laptop(tmp_path / "home", path=f"{shims}{os.pathsep}{os.environ['PATH']}")
    assert OLD_RSYNC[flavor].split("\\n")[0] in laptop.command("rsync", "--version").stdout
    spec = workdir(tmp_path)
    up_ssh(laptop, sshd_server, tmp_path, "far")
    run_and_pull(laptop, "far", spec, tmp_path / "pulled")


def test_laptop_without_rsync_runs_the_demo_case_3(tmp_path):
    """Case 3: on a machine with Python and nothing else (a fresh Debian container), `rgt demo`
    used to die with FileNotFoundError 'rsync' and leave the demo box up."""
    bare = path_without(tmp_path / "bin", ["rsync"])
    laptop = Laptop(tmp_path / "home", path=str(bare))
    assert laptop.command("sh", "-c", "command -v rsync || echo none").stdout.strip() == "none"
    result = laptop("demo", "--steps", "30", timeout=300)
    assert_clean(result)
    assert "checkpoints loaded" in result.stdout
    report = verified_in(laptop.home)
    assert report["ok"] and any(f["path"].endswith("final.pt") for f in report["files"])
    boxes = list((laptop.home / "boxes").iterdir())
    assert len(boxes) == 1 and not (boxes[0] / "scratch").exists(), "the box must be down"


def test_box_without_rsync_case_4(tmp_path, cli, stock_box):  # noqa: F811  (fixture)
    """Case 4: a box image without rsync (minimal and CUDA base images) used to stop `rgt run`
    at "rsync is not installed on the box"; the user may not be root to install it."""
    box = stock_box("rgt-norsync", without=("rsync",))
    assert_clean(cli("up", "bare", "--profile", "generic-ssh", "--ssh", box.ssh,
                     "--data-dir", str(box.user.dir("bare-data")),
                     "--durable-dir", str(box.user.dir("bare-durable"))))
    spec = workdir(tmp_path)
    run_and_pull(cli, "bare", spec, tmp_path / "pulled")
    pushed = next(box.user.home.glob("rgt-test-bare-data/rgt/*/code"))
    assert (pushed / "data.bin").read_bytes() == (spec.parent / "data.bin").read_bytes()
    assert len(list((pushed / "pkg").iterdir())) == 20
