"""`rgt plot --png` without the `plot` extra says so in one line before any work: no chart in
the terminal first, no reading the box; a --png name that cannot be written is refused as early."""

from __future__ import annotations

import os
from pathlib import Path

from boxkit import write_job

BLOCK = "import sys\nsys.modules['matplotlib'] = None  # as if never installed\n"


def _run_with_metrics(cli, tmp_path: Path) -> str:
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="for i in 1 2 3 4; do echo step=$i loss=0.$i; done")
    run_id = cli.ok("run", "box", str(spec)).stdout.split()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    return run_id


def test_png_without_matplotlib_is_one_line_before_any_chart(cli, tmp_path):
    run_id = _run_with_metrics(cli, tmp_path)
    assert "loss" in cli.ok("plot", "box", run_id).stdout  # the terminal chart needs nothing
    hidden = tmp_path / "no-matplotlib"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(BLOCK)
    path = os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH")]))
    png = tmp_path / "x.png"
    without = cli("plot", "box", run_id, "--png", str(png), env={"PYTHONPATH": path})
    assert without.returncode == 2, without.stdout + without.stderr
    assert without.stdout == "", "nothing drawn before the refusal"
    lines = without.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'rgt[plot]'" in lines[0], without.stderr
    assert not png.exists()
    # before reading anything: a box that does not exist is not the first complaint
    early = cli("plot", "nobox", "--png", str(png), env={"PYTHONPATH": path})
    assert early.returncode == 2 and "pip install 'rgt[plot]'" in early.stderr, early.stderr


def test_a_png_name_that_cannot_be_written_is_refused_first(cli, tmp_path):
    run_id = _run_with_metrics(cli, tmp_path)
    for bad, said in ((tmp_path / "x.jpg", "ending in .png"),
                      (tmp_path / "nowhere" / "x.png", "does not exist")):
        refused = cli("plot", "box", run_id, "--png", str(bad))
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert refused.stdout == "" and len(refused.stderr.strip().splitlines()) == 1
