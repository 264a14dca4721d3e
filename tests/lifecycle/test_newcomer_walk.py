"""What a newcomer met on the local box: `rgt runs` of an attempt chain in an 80-column terminal
(run ids cut across three lines, whole chains of ids in one column), and `rgt watch --timeout`
with a negative number (it waited no time and exited 4, 'still running after -5 s')."""

from __future__ import annotations

import pytest
from boxkit import write_job
from rich.cells import cell_len

JOB = "a-rather-long-job-name"  # run ids of 42 characters


@pytest.fixture
def chain(cli, tmp_path):
    """Three attempts of one job: each leaves a checkpoint in the home and fails."""
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", name=JOB, checkpoint_dir="$RGT_CKPT_DIR",
                     run='mkdir -p "$RGT_CKPT_DIR" && touch "$RGT_CKPT_DIR/ckpt.pt" && exit 3')
    ids = []
    for _ in range(3):
        run_id = cli.ok("run", "box", str(spec)).stdout.split()[-1]
        assert cli("watch", "box", run_id, "--until-done", "--timeout", "60").returncode == 1
        ids.append(run_id)
    return ids


def test_runs_fits_80_columns_with_ids_whole(cli, chain):
    shown = cli.ok("runs", env={"COLUMNS": "80"}).stdout
    lines = shown.splitlines()
    assert not [line for line in lines if cell_len(line) > 80], shown
    assert lines[0].split() == ["RUN", "BOX", "JOB", "STATUS", "ATTEMPT", "AGE", "PULLED"]
    first, second, third = chain
    rows = {}
    for run_id in chain:  # an id too long for the row has a line of its own, the facts under it
        at = next(i for i, line in enumerate(lines) if line.startswith(run_id))
        rows[run_id] = at + 1 if lines[at] == run_id else at
    assert "failed (3)" in lines[rows[first]] and " 1 →" in lines[rows[first]]
    assert " 2 ← →" in lines[rows[second]]
    assert " 3 ←" in lines[rows[third]]
    # under each attempt, the attempts it continues and was continued by, ids whole (on two
    # lines where one would be wider than 80)

    def links(row: int) -> list[str]:
        words = []
        for line in lines[row + 1:]:
            if not line.startswith(("  ←", "  →")):
                break
            words += line.split()
        return words

    assert links(rows[first]) == ["→", second]
    assert links(rows[second]) == ["←", first, "→", third]
    assert links(rows[third]) == ["←", second]
    wide = cli.ok("runs", env={"COLUMNS": "200"}).stdout
    assert " 2 ← →" in wide


@pytest.mark.parametrize("how", ["--until-done", "--follow"])
@pytest.mark.parametrize("timeout", ["-5", "nan"])
def test_watch_refuses_a_timeout_below_zero(cli, tmp_path, how, timeout):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "job", run="sleep 30")
    run_id = cli.ok("run", "box", str(spec)).stdout.split()[-1]
    result = cli("watch", "box", run_id, how, "--timeout", timeout)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: --timeout takes a number of seconds >= 0, not {timeout}"]
