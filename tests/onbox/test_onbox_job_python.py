"""The job's `python` is the interpreter rgt found, not the first one on the box's PATH: the
runner, started by that interpreter, puts RUN_DIR/bin (python, python3, pip, pip3) first."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from onbox_helpers import wait_status

from rgt.onbox import runner

ME = os.path.realpath(sys.executable)
DECOY = "#!/bin/sh\necho \"decoy $(basename \"$0\") ran\"\nexit 97\n"


def decoys(directory: Path, names=("python", "python3", "pip", "pip3")) -> Path:
    """A PATH directory whose pythons are not Python at all: they say so and exit 97."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_text(DECOY)
        (directory / name).chmod(0o755)
    return directory


def write_run(run_dir: Path, command: str, *, setup: str | None = None,
              env: dict | None = None) -> Path:
    code = run_dir / "code"
    code.mkdir(parents=True)
    (code / "train.py").write_text(
        "import os, sys\nprint('train python', os.path.realpath(sys.executable))\n")
    spec = {"run_id": run_dir.name, "command": command, "workdir": str(code),
            "env": dict(env or {}), "heartbeat_s": 0.5, "kill_grace_s": 2}
    if setup:
        spec["setup"] = setup
    (run_dir / "run.json").write_text(json.dumps(spec))
    return run_dir


def test_python_and_python3_in_the_job_are_the_runners_interpreter(tmp_path, launcher):
    path = f"{decoys(tmp_path / 'decoys')}{os.pathsep}/usr/bin{os.pathsep}/bin"
    run_dir = write_run(tmp_path / "rgt" / "r1",
                        "python train.py && python3 -c 'import sys; print(\"py3\", "
                        "sys.version_info[:2])' && pip --version && command -v python",
                        env={"PATH": path})
    launcher.start(run_dir)
    state = wait_status(run_dir, ("succeeded", "failed"), timeout=60)
    log = (run_dir / "log").read_text()
    assert state["status"] == "succeeded", log
    assert "decoy" not in log
    assert f"train python {ME}" in log
    assert f"py3 ({sys.version_info[0]}, {sys.version_info[1]})" in log
    assert f"python {sys.version_info[0]}.{sys.version_info[1]}" in log  # pip's own line
    assert f"{run_dir}/bin/python\n" in log
    assert f"the job's python and python3 are {sys.executable}" in log


def test_an_env_the_job_activates_itself_still_wins(tmp_path, launcher):
    own = decoys(tmp_path / "own-env" / "bin", names=("python",))
    (own / "python").write_text("#!/bin/sh\necho own env python\n")
    setup_run = write_run(tmp_path / "rgt" / "r-setup", "python train.py",
                          setup=f"export PATH={own}:$PATH")
    inline = write_run(tmp_path / "rgt" / "r-inline", f"PATH={own}:$PATH python train.py")
    for run_dir in (setup_run, inline):
        launcher.start(run_dir)
    for run_dir in (setup_run, inline):
        state = wait_status(run_dir, ("succeeded", "failed"), timeout=60)
        log = (run_dir / "log").read_text()
        assert state["status"] == "succeeded" and "own env python" in log, log
        assert "train python" not in log


def test_the_shims_run_sh_and_quote_the_interpreter(tmp_path):
    odd = tmp_path / "dir with 'quote'" / "python3.11"
    odd.parent.mkdir()
    odd.symlink_to(sys.executable)
    shims = runner.interpreter_shims(str(odd), has_pip=False)
    assert sorted(shims) == ["python", "python3"]
    assert all(text.startswith("#!/bin/sh\n") for text in shims.values())
    bin_dir = tmp_path / "bin"
    (bin_dir).mkdir()
    (bin_dir / "pip").write_text("stale")
    runner.write_shims(str(bin_dir), shims)
    assert not (bin_dir / "pip").exists()  # a stale pip for another interpreter is gone
    out = os.popen(f"'{bin_dir}/python' -c 'print(40 + 2)'").read()
    assert out == "42\n"
    assert runner.prepend_path(str(bin_dir), f"/usr/bin:{bin_dir}:/bin") == {
        "PATH": f"{bin_dir}:/usr/bin:/bin"}
    assert runner.prepend_path(str(bin_dir), None) == {"PATH": f"{bin_dir}:/usr/bin:/bin"}
