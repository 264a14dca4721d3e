"""Will the trainer save when it is told to stop? A hint before the GPU-hours are spent.

A preemption, a walltime or `docker stop` sends SIGTERM and, a grace period later, SIGKILL.
Neither Hugging Face's Trainer nor Lightning saves on SIGTERM by default (HF dies at once;
Lightning exits 0 without saving), so everything since the last periodic save is lost. This
reads the job's Python sources for the framework it uses and for the one line that makes it
save, and says how when that line is missing. A text search, not an analysis: it can miss a
trainer built elsewhere, and it says nothing when it sees nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_FILES = 200
MAX_BYTES = 1_000_000
SKIP = {".git", ".venv", "venv", "__pycache__", "node_modules", "data", "datasets", "wandb"}

HF = (re.compile(r"^\s*(from|import)\s+(transformers|trl)\b", re.M),
      re.compile(r"\b\w*Trainer\("))
LIGHTNING = (re.compile(r"^\s*(from|import)\s+(lightning|pytorch_lightning)\b", re.M),
             re.compile(r"\b(pl|L|lightning|pytorch_lightning)?\.?Trainer\("))
TORCH_SAVE = re.compile(r"\btorch\.save\(")
HANDLES_SIGNALS = re.compile(r"PreemptionFlag|signal\.signal\(|SaveOnSignal|OnExceptionCheckpoint"
                             r"|SIGTERM")


def sources(workdir: Path) -> list[Path]:
    """The job's Python files, bounded (a dataset directory is not read)."""
    found: list[Path] = []
    pending = [workdir]
    while pending and len(found) < MAX_FILES:
        here = pending.pop(0)
        try:
            entries = sorted(here.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() and entry.name not in SKIP and not entry.name.startswith("."):
                pending.append(entry)
            elif entry.suffix == ".py" and entry.is_file():
                found.append(entry)
    return found[:MAX_FILES]


def hints(workdir: Path, grace: str | None = None) -> list[str]:
    """One line per framework that will not save on SIGTERM, saying how to make it."""
    out: list[str] = []
    when = f" (this platform's grace before SIGKILL: {grace})" if grace else ""
    for path in sources(workdir):
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        name = path.relative_to(workdir)
        if HANDLES_SIGNALS.search(text):
            continue
        if all(p.search(text) for p in HF):
            out.append(f"{name}: Hugging Face Trainer does not save on SIGTERM{when}; add "
                       "`from rgt.ckpt.hf import SaveOnSignal` and `callbacks=[SaveOnSignal()]`"
                       " — it saves checkpoint-N at the next step and exits 85 (resume with "
                       "resume_from_checkpoint)")
        elif all(p.search(text) for p in LIGHTNING):
            out.append(f"{name}: Lightning exits 0 on SIGTERM without saving{when}; add "
                       "`OnExceptionCheckpoint(dirpath=os.environ['RGT_CKPT_DIR'])` to the "
                       "Trainer's callbacks — it writes on_exception.ckpt when SIGTERM arrives "
                       "(resume with trainer.fit(..., ckpt_path=...))")
        elif TORCH_SAVE.search(text):
            out.append(f"{name}: torch.save without a SIGTERM handler{when}; wrap the loop in "
                       "`with rgt.ckpt.PreemptionFlag() as preempted:` and, when it is set, "
                       "save and exit 85 (rgt.ckpt.EXIT_PREEMPTED)")
    return out
