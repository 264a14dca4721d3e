"""`rgt audit`: phase 0, measured live on the box, never assumed; stored as evidence."""

from __future__ import annotations

import re
import shlex
from typing import Any

from rgt.boxfacts import facts
from rgt.platforms import Platform, platform_for
from rgt.profiles import load_profile
from rgt.remote.calls import run_json
from rgt.remote.reach import find_python, python_candidates
from rgt.spec import JobSpec
from rgt.store import Box, Store

_PYTHON_WORD = re.compile(r"^(?:.*/)?python[0-9.]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
JOB_SHIMS = ("python", "python3")  # what a job's bare word runs: the box's own interpreter


def spec_python(spec: JobSpec) -> str | None:
    """The interpreter the job's `run` starts itself with (`python train.py`,
    `/opt/conda/bin/python -m x`, `env A=1 python3 ...`), or None when it names none."""
    for line in spec.run.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        while words and (words[0] in ("exec", "env", "nohup") or _ASSIGNMENT.match(words[0])):
            words = words[1:]
        if words and _PYTHON_WORD.match(words[0]):
            return words[0]
    return None


def audit(store: Store, box_name: str, spec: JobSpec | None = None) -> dict[str, Any]:
    """Audit the box; the job's interpreter (torch, CUDA) is the one `spec` runs with if it
    names one by path (`/opt/conda/bin/python`, `python3.10`), else the box's own (found at
    `up`: the profile's first, then python3, python), which a bare `python` or `python3` in
    the job runs."""
    box = store.box(box_name)
    profile = load_profile(box.profile)
    hf_cache = profile.overrides.get("HF_HOME", "~/.cache/huggingface").split()[0]
    if hf_cache.startswith("~") or "{" in hf_cache:
        hf_cache = "$HOME/.cache/huggingface"
    named = spec_python(spec) if spec is not None else None
    if named in JOB_SHIMS:  # the runner makes these the box's interpreter (onbox/runner.py)
        named = None
    platform = platform_for(box.profile)
    if not platform.has_shell:
        return _audit_without_shell(store, box, platform)
    transport = platform.connect(box)
    try:
        home = transport.run('printf "%s" "$HOME"', timeout=30).stdout.strip()
        hf_cache = hf_cache.replace("$HOME", home)
        # A box registered before `up` recorded its interpreter: look, as `up` now does.
        box_python = facts(box).python or find_python(
            transport, python_candidates(profile)).command
        python = named or box_python
        report = run_json(transport, "audit", "--dirs", box.data_dir, box.durable_dir,
                          "--py", python, "--hf-cache", hf_cache, timeout=180)
        # e.g. Slurm: {"scheduler": partitions, GRES, limits, shared vs node-local filesystems}
        for key, extra in platform.audit_extras(transport, box).items():
            report[key] = extra
            if isinstance(extra, dict):
                report["verdicts"] = report.get("verdicts", []) + extra.get("verdicts", [])
    finally:
        transport.close()
    report["job_python"] = {"command": python, "from": "spec" if named else "box"}
    if isinstance(report.get("interpreter"), dict):
        report["interpreter"]["command"] = box_python
    report["verdicts"] = report.get("verdicts", []) + _profile_python_verdicts(
        profile.launch.env_contract.python, box_python)
    ok = not any(v.get("level") == "fail" for v in report.get("verdicts", []))
    store.add_evidence("audit", box.name, ok, report)
    store.record("audit", {"ok": ok, "verdicts": report.get("verdicts", [])}, box=box.name)
    return report


def _audit_without_shell(store: Store, box: Box, platform: Platform) -> dict[str, Any]:
    """A notebook platform (Colab, Kaggle) runs no command rgt sends: measuring "the box" would
    measure this laptop. Only what the platform can tell from outside (Drive, a quota)."""
    report: dict[str, Any] = {
        "measured": False,
        "verdicts": [{"level": "note", "id": "", "message": f"nothing measured on the "
                      f"{box.profile} runtime: rgt cannot run commands there (it reaches it "
                      "only through the notebook it writes); the notebook checks the GPU and "
                      "Python it gets when it starts"}]}
    transport = platform.connect(box)
    try:
        for key, extra in platform.audit_extras(transport, box).items():
            report[key] = extra
            if isinstance(extra, dict):
                report["verdicts"] += extra.get("verdicts", [])
    finally:
        transport.close()
    ok = not any(v.get("level") == "fail" for v in report["verdicts"])
    store.add_evidence("audit", box.name, ok, report)
    store.record("audit", {"ok": ok, "verdicts": report["verdicts"]}, box=box.name)
    return report


def _profile_python_verdicts(profile_python: str, box_python: str) -> list[dict[str, str]]:
    """Say so when the profile's interpreter was not usable on this box and another one runs
    the job: a warning where the profile names a path (an image's environment, AutoDL's conda
    base, AD6), a note where it names a command the box simply spells differently."""
    wanted = profile_python.split()[0] if profile_python.split() else ""
    if not wanted or wanted == box_python:
        return []
    level = "warn" if "/" in wanted else "note"
    return [{"level": level, "id": "AD6",
             "message": f"the profile's interpreter `{wanted}` is not usable on this box "
                        f"(missing, or older than 3.8): rgt's scripts and the job get "
                        f"{box_python}"}]
