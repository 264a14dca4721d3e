"""`rgt audit`: phase 0, measured live on the box, never assumed; stored as evidence."""

from __future__ import annotations

from typing import Any

from rgt.lifecycle.boxes import transport_for
from rgt.lifecycle.onbox import run_json
from rgt.platforms import platform_for
from rgt.profiles import load_profile
from rgt.store import Store


def audit(store: Store, box_name: str) -> dict[str, Any]:
    box = store.box(box_name)
    profile = load_profile(box.profile)
    python = profile.launch.env_contract.python.split()[0]
    hf_cache = profile.overrides.get("HF_HOME", "~/.cache/huggingface").split()[0]
    if hf_cache.startswith("~") or "{" in hf_cache:
        hf_cache = "$HOME/.cache/huggingface"
    transport = transport_for(box)
    try:
        home = transport.run('printf "%s" "$HOME"', timeout=30).stdout.strip()
        hf_cache = hf_cache.replace("$HOME", home)
        report = run_json(transport, "audit", "--dirs", box.data_dir, box.durable_dir,
                          "--py", python, "--hf-cache", hf_cache, timeout=180)
        platform = platform_for(box.profile)
        if platform is not None and hasattr(platform, "audit"):
            # e.g. Slurm: partitions, GRES, limits, shared vs node-local filesystems
            report["scheduler"] = platform.audit(transport, box)
            report["verdicts"] = report.get("verdicts", []) + report["scheduler"]["verdicts"]
    finally:
        transport.close()
    ok = not any(v.get("level") == "fail" for v in report.get("verdicts", []))
    store.add_evidence("audit", box.name, ok, report)
    store.record("audit", {"ok": ok, "verdicts": report.get("verdicts", [])}, box=box.name)
    return report
