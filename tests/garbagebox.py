"""A local box that answers garbage (issue 28), shared by tests/lifecycle/test_box_garbage.py
and bench/box_memory.py.

`GarbageBox.make` registers a local box and runs one real job on it to the end (an output, a
checkpoint in its home), so every verb has something to read. Then the box turns hostile in
the two ways a rented box can: its job writes what it likes into the run's state.json, log and
outputs (plain files here), and its interpreter lies — `lie(probe=..., manifest=...)` swaps
the box's recorded Python for a script that answers rgt's on-box probe with the given bytes,
or replaces the manifest the real on-box script wrote, and runs everything else truly.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from rgt.lifecycle.watch import ENDED_EVENT

# The interpreter a lying box has: on-box scripts arrive on stdin (`python - ARGS`), so the
# script's first docstring line says which one it is.
LIAR = """#!/bin/bash
answers={answers}
script=$(mktemp); trap 'rm -f "$script"' EXIT
cat > "$script"
if grep -q '^\"\"\"rgt on-box probe' "$script" && [ -e "$answers/probe" ]; then
  cat "$answers/probe"; exit 0
fi
{python} "$@" < "$script"; rc=$?
if grep -q '^\"\"\"rgt on-box manifest' "$script" && [ -e "$answers/manifest" ]; then
  cp "$answers/manifest" "$3"
fi
exit $rc
"""

JOB = ("mkdir -p out && echo weights > out/w.bin && mkdir -p $RGT_CKPT_DIR/checkpoint-5 && "
       "echo ck > $RGT_CKPT_DIR/checkpoint-5/model.safetensors && echo done")


def rgt_env(home: Path) -> dict[str, str]:
    return {**os.environ, "RGT_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"}


def rgt_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "rgt", *args]


class GarbageBox:
    def __init__(self, root: Path, run_id: str) -> None:
        self.root = root
        self.home = root / "home"
        self.run_id = run_id
        self.run_dir = self.home / "boxes" / "box" / "scratch" / "rgt" / run_id
        self.answers = root / "answers"

    @classmethod
    def make(cls, root: Path) -> GarbageBox:
        root.mkdir(parents=True, exist_ok=True)
        home = root / "home"
        job = root / "job"
        job.mkdir(exist_ok=True)
        (job / "job.yaml").write_text(json.dumps({
            "name": "job", "workdir": ".", "run": JOB, "outputs": ["out"],
            "checkpoint_dir": "$RGT_CKPT_DIR"}))
        env = rgt_env(home)
        for args in (("up", "box"), ("run", "box", str(job / "job.yaml"))):
            done = subprocess.run(rgt_argv(*args), env=env, capture_output=True, text=True,
                                  timeout=120, cwd=root)
            assert done.returncode == 0, done.stdout + done.stderr
        run_id = done.stdout.strip().splitlines()[-1]
        box = cls(root, run_id)
        deadline = time.monotonic() + 60
        while box.state().get("status") not in ("succeeded", "failed", "sync-failed"):
            assert time.monotonic() < deadline, box.state()
            time.sleep(0.2)
        box.answers.mkdir()
        box.pristine = {name: (box.run_dir / name).read_bytes() for name in ("state.json", "log")}
        return box

    def state(self) -> dict:
        try:
            return json.loads((self.run_dir / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def restore(self) -> None:
        """Back to the honest box the job left (between examples of a property test)."""
        for name, data in self.pristine.items():
            (self.run_dir / name).write_bytes(data)
        for answer in self.answers.iterdir():
            answer.unlink()
        self._set_python("python3")
        # and forget what an earlier example's `watch` kept of the ended run, so the next verb
        # asks the box again (rgt.cli.watch_cmd shows a kept summary without asking)
        with sqlite3.connect(self.home / "state.db") as db:
            db.execute("DELETE FROM events WHERE kind = ?", (ENDED_EVENT,))

    def lie(self, *, probe: bytes | Path | None = None,
            manifest: bytes | Path | None = None) -> None:
        """From now on the box's interpreter answers the probe with PROBE and hands rgt
        MANIFEST instead of the manifest it built (either left as is when None; a Path is
        linked, not read: a benchmark's answers are hundreds of MB)."""
        for name, answer in (("probe", probe), ("manifest", manifest)):
            target = self.answers / name
            if answer is None:
                continue
            if target.exists():
                target.unlink()
            if isinstance(answer, Path):
                os.link(answer, target)
            else:
                target.write_bytes(answer)
        liar = self.root / "liar-python"
        liar.write_text(LIAR.format(answers=self.answers, python=sys.executable))
        liar.chmod(0o755)
        self._set_python(str(liar))

    def _set_python(self, python: str) -> None:
        with sqlite3.connect(self.home / "state.db") as db:
            db.execute("UPDATE boxes SET extra = json_set(extra, '$.python', ?) "
                       "WHERE name = 'box'", (python,))

    def argv(self, verb: str) -> list[str]:
        """The command line of VERB against this box's run."""
        dest = str(self.root / "results")
        return rgt_argv(*{
            "watch": ("watch", "box", self.run_id),
            "json": ("watch", "box", self.run_id, "--json"),
            "logs": ("logs", "box", self.run_id, "-n", "5"),
            "follow": ("watch", "box", self.run_id, "--follow", "--timeout", "20"),
            "pull": ("pull", "box", self.run_id, "--dest", dest),
            "runs": ("runs",),
            "top": ("top", "--once"),
            "plan": ("down", "box"),  # judged, then asks for a typed name: stdin gives none
            "ckpt": ("ckpt", "ls", f"{dest}/ckpt"),
            "down": ("down", "box", "--yes"),
            "discard": ("down", "box", "--discard-results"),
        }[verb])


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth
