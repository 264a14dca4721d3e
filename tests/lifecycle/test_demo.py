"""The README's main command, end to end."""

from __future__ import annotations


def test_demo_runs_the_whole_lifecycle(cli):
    result = cli("demo", "--steps", "120", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for phase in ("1. up", "2. run", "3. watch", "4. pull + verify", "5. down"):
        assert phase in result.stdout
    assert "checkpoints loaded" in result.stdout
    report = cli.verified()
    assert report["ok"] and any(f["path"].endswith("final.pt") and f["loads"]
                                for f in report["files"])
    boxes = list((cli.home / "boxes").iterdir())
    assert len(boxes) == 1 and not (boxes[0] / "scratch").exists()
    assert (boxes[0] / "durable").is_dir()


def test_a_failing_demo_tears_its_box_down_and_says_where_it_stopped(cli, tmp_path):
    # The training job itself crashes (a sitecustomize the job's interpreter loads), as a
    # broken environment would make it; rgt itself runs unharmed.
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import sys\n"
        "if any('train_mlp' in a for a in sys.argv):\n"
        "    sys.exit('simulated broken environment')\n")
    result = cli("demo", "--steps", "50", env={"PYTHONPATH": str(hooks)}, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stopped at step 'watch'" in result.stderr and "was torn down" in result.stderr
    assert "Traceback" not in result.stderr
    listing = cli.ok("ls").stdout
    assert "No box is up" in listing  # nothing left up (the torn-down one is listed by --all)
    logs = list((cli.home / "demo").glob("*/failed-run.log"))
    assert logs and "simulated broken environment" in logs[0].read_text()
