"""Will the trainer save when it is told to stop? A hint before the GPU-hours are spent.

A preemption, a walltime or `docker stop` sends SIGTERM and, a grace period later, SIGKILL.
Neither Hugging Face's Trainer nor Lightning saves on SIGTERM by default (HF dies at once;
Lightning exits 0 without saving), so everything since the last periodic save is lost. This
reads the job's Python sources for the framework it uses and for the one line that makes it
save, and says how when that line is missing. A text search, not an analysis: it can miss a
trainer built elsewhere, and it says nothing when it sees nothing.

Only the files the job's command runs are read: the scripts it names (`python train.py`,
`torchrun … train.py`, `-m pkg.module`, and the same inside a shell script of the workdir it
runs) and the workdir's modules they import, followed through imports. A hint about a
`prepare_data.py` or an old `train_v1.py` the command never starts would be a word with
nothing checked behind it.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
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


_SCRIPT = re.compile(r"(?<![\w$/.-])((?:\./)?[\w./-]+\.(?:py|sh))\b")
_MODULE = re.compile(r"(?:^|\s)-m\s+([\w.]+)")


def run_files(workdir: Path, commands: Iterable[str]) -> list[Path]:
    """The workdir's Python files COMMANDS run: the scripts and modules they name (in a shell
    script of the workdir too), then the workdir's modules those import, transitively."""
    root = workdir.resolve()
    todo: list[Path] = []
    texts, seen_scripts = list(commands), set()
    while texts and len(seen_scripts) < MAX_FILES:
        text = texts.pop()
        for name in _SCRIPT.findall(text):
            path = _inside(root, root / name)
            if path is None or path in seen_scripts:
                continue
            seen_scripts.add(path)
            if path.suffix == ".sh":
                texts.append(_read(path))
            else:
                todo.append(path)
        todo += filter(None, (_module_file(root, root, m) for m in _MODULE.findall(text)))
    found: list[Path] = []
    while todo and len(found) < MAX_FILES:
        path = todo.pop(0)
        if path in found:
            continue
        found.append(path)
        todo += _imports(root, path)
    return found


def _inside(root: Path, path: Path) -> Path | None:
    path = path.resolve()
    return path if path.is_file() and path.is_relative_to(root) else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES]
    except OSError:
        return ""


def _module_file(root: Path, base: Path, dotted: str) -> Path | None:
    where = base.joinpath(*dotted.split("."))
    for candidate in (where.with_suffix(".py"), where / "__init__.py", where / "__main__.py"):
        found = _inside(root, candidate)
        if found is not None:
            return found
    return None


def _imports(root: Path, path: Path) -> list[Path]:
    """The workdir's modules PATH imports: found from the workdir and from the script's own
    directory (both are on sys.path for `python dir/train.py` run in the workdir)."""
    try:
        tree = ast.parse(_read(path))
    except (SyntaxError, ValueError):
        return []
    out: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [(alias.name, (root, path.parent)) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level > len(path.parents):
                continue
            bases = (path.parents[node.level - 1],) if node.level else (root, path.parent)
            module = node.module or ""
            names = [(f"{module}.{alias.name}".strip("."), bases) for alias in node.names]
            names.append((module, bases))
        else:
            continue
        for dotted, bases in names:
            for base in bases:
                if dotted and (found := _module_file(root, base, dotted)) is not None:
                    out.append(found)
                    break
    return out


def hints(workdir: Path, grace: str | None = None, *,
          commands: Iterable[str] | None = None) -> list[str]:
    """One line per framework that will not save on SIGTERM, saying how to make it: in the
    files COMMANDS run (every Python file of the workdir when none are given)."""
    out: list[str] = []
    when = f" (this platform's grace before SIGKILL: {grace})" if grace else ""
    files = sources(workdir) if commands is None else run_files(workdir, commands)
    root = workdir.resolve()
    for path in files:
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        name = os.path.relpath(path.resolve(), root)
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
