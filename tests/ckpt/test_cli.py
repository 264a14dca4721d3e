"""`rgt ckpt ls` / `rgt ckpt verify` on good, damaged and missing paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rgt.ckpt import Checkpointer, CheckpointNotFoundError
from rgt.cli import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def rgt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rgt", *args], capture_output=True, text=True,
                          env={**os.environ, **ENV}, timeout=120)


@pytest.fixture
def ckdir(tmp_path: Path) -> Path:
    ck = Checkpointer(tmp_path / "c", keep_last=3, format="pickle")
    for s, m in ((10, 0.9), (20, 0.5), (30, 0.7)):
        ck.save({"step": s, "blob": b"x" * 5000}, s, metric=m)
    return tmp_path / "c"


def _damage(p: Path) -> None:
    with open(p, "r+b") as f:
        f.seek(100)
        f.write(b"\x00\xff\x00")


def test_ls_table(ckdir: Path) -> None:
    _damage(ckdir / "ckpt-0000000030.pt")
    (ckdir / "ckpt-0000000040.pt").write_bytes(b"half")  # killed before its sidecar
    r = runner.invoke(app, ["ckpt", "ls", str(ckdir)], env=ENV)
    assert r.exit_code == 0, r.output
    rows = {ln.split()[1]: ln for ln in r.output.splitlines()
            if "ckpt-00" in ln and ln.startswith("│")}
    assert set(rows) == {"10", "20", "30", "40"}
    # 40 was written last but is no save; 30 is damaged: 20 is what a resume takes
    assert "newest: ckpt-0000000040.pt (the last written) is damaged; the newest intact is " \
        "ckpt-0000000020.pt" in r.output
    assert "yes" in rows["10"] and "0.9" in rows["10"] and "5,0" in rows["10"]
    assert "no" in rows["30"] and "sha256" in rows["30"]
    assert "no sidecar" in rows["40"]
    quick = runner.invoke(app, ["ckpt", "ls", "--quick", str(ckdir)], env=ENV)
    assert quick.exit_code == 0 and "size ok" in quick.output


def test_ls_empty_and_missing(tmp_path: Path) -> None:
    r = runner.invoke(app, ["ckpt", "ls", str(tmp_path)], env=ENV)
    assert r.exit_code == 0 and "no checkpoints" in r.output
    r = runner.invoke(app, ["ckpt", "ls", str(tmp_path / "nope")], env=ENV)
    assert isinstance(r.exception, CheckpointNotFoundError)


def test_verify_good_and_damaged(ckdir: Path) -> None:
    r = runner.invoke(app, ["ckpt", "verify", str(ckdir / "ckpt-0000000020.pt")], env=ENV)
    assert r.exit_code == 0 and "OK" in r.output and "step=20" in r.output
    assert "loads=yes" in r.output
    _damage(ckdir / "ckpt-0000000020.pt")
    r = runner.invoke(app, ["ckpt", "verify", str(ckdir / "ckpt-0000000020.json")], env=ENV)
    assert r.exit_code == 1 and "DAMAGED" in r.output and "sha256 mismatch" in r.output


def test_verify_torch_checkpoint(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    rec = Checkpointer(tmp_path).save({"w": torch.ones(1000)}, 3)
    r = runner.invoke(app, ["ckpt", "verify", str(rec.path)], env=ENV)
    assert r.exit_code == 0 and "step=3" in r.output and "loads=yes" in r.output
    os.truncate(rec.path, rec.bytes - 10)
    r = runner.invoke(app, ["ckpt", "verify", str(rec.path)], env=ENV)
    assert r.exit_code == 1 and "truncated" in r.output and "loads=no" in r.output


def test_real_command_exit_codes_and_one_line_errors(ckdir: Path, tmp_path: Path) -> None:
    ok = rgt("ckpt", "verify", str(ckdir / "ckpt-0000000010.pt"))
    assert ok.returncode == 0, ok.stderr
    _damage(ckdir / "ckpt-0000000010.pt")
    bad = rgt("ckpt", "verify", str(ckdir / "ckpt-0000000010.pt"))
    assert bad.returncode == 1 and "DAMAGED" in bad.stdout
    for args in (("verify", str(tmp_path / "missing.pt")), ("ls", str(tmp_path / "nodir")),
                 ("verify", str(ckdir))):
        r = rgt("ckpt", *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert r.stderr.startswith("error:")
