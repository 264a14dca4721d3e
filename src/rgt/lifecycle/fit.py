"""Does the job fit the box? The spec's `resources`, checked wherever a run starts.

`rgt up` refuses what a platform cannot rent; a spec's `resources` reach a box that is already
up, so `rgt run` (and `--dry-run`, `resume`) checks them there, before the push:

- a platform that maps resources per job (a scheduler: Slurm, Kubernetes; a notebook) refuses
  what it cannot map in its own launch and render; nothing more is measured here;
- any other box is one machine, or a group of them (rgt.remote.group), that is what it is:
  more `nodes` than it has and TPUs are refused by name, and what can be measured is
  measured live on it (its head) in one round trip (GPU model and count from nvidia-smi,
  cpus, memory, free disk under the data dir) and refused when short.
  What cannot be measured on a running machine (image, region, spot, bid, time: set when it
  was rented) is said to be unchecked, never called checked.

`--skip-resource-check` is the override for a user who knows better; the run's record says it
was skipped.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from rgt.errors import UserError
from rgt.platforms.base import size_gb
from rgt.remote import group
from rgt.spec import GPU_CONSTRAINT, JobSpec
from rgt.store import Box

UNMEASURABLE = ("image", "region", "spot", "bid", "time")
MAX_ANSWER = 64 * 1024  # bytes of the box's answer read; more is garbage
_LINE = re.compile(r"^(cpus|mem_kb|disk_free_kb|gpu|gpu_error)=(.*)$")


@dataclass
class Fit:
    """What was checked against the box, what could not be, and whether the user skipped it."""

    checked: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    skipped: bool = False

    def record(self) -> dict:
        return {"checked": self.checked, "unchecked": self.unchecked, "skipped": self.skipped}

    def lines(self) -> list[str]:
        if self.skipped:
            return ["resources   NOT checked (--skip-resource-check)"]
        out = [f"resources   {c}" for c in self.checked]
        if self.unchecked:
            out.append(f"            not checkable on a running machine: "
                       f"{', '.join(self.unchecked)} (set when it was rented)")
        return out


def refuse_tpu(spec: JobSpec) -> None:
    """No platform rgt drives runs TPUs: a TPU request must not become one NVIDIA GPU."""
    for gpu in [spec.resources.gpu or "", *spec.resources.gpu_alternatives]:
        if gpu.lower().startswith("tpu"):
            raise UserError(f"resources.gpu {gpu!r} is a TPU; rgt drives GPU boxes only, and "
                            "none of its platforms rents TPUs: drop it or use another tool")


def check(platform, box: Box, spec: JobSpec, transport_of, *, skip: bool = False) -> Fit:
    """Check SPEC's resources against BOX (see the module docstring); `transport_of()` opens
    the connection, only when something must be measured. Raises a one-line UserError."""
    refuse_tpu(spec)
    res = spec.resources
    if skip:
        return Fit(skipped=True)
    if getattr(platform, "per_job_resources", False) or not platform.has_shell:
        return Fit()  # the platform maps them itself, in its launch and render
    if res.nodes > group.size(box):
        have = group.size(box)
        raise UserError(f"resources.nodes {res.nodes}: {box.name} ({box.profile}) is "
                        + ("one machine" if have == 1 else f"a group of {have} machines")
                        + "; register a group with `rgt up NAME --ssh 'ssh a' --ssh 'ssh b' …` "
                        "(or rent one with --nodes N), or use a slurm or kubernetes box")
    if res.nodes > 1:
        group.refuse_unrunnable(spec)
    fit = Fit(unchecked=[n for n in UNMEASURABLE if getattr(res, n) not in (None, False)])
    if not (res.gpu or res.cpus or res.mem or res.disk):
        return fit
    facts = measure(transport_of(), box)
    if res.gpu:
        fit.checked.append(_gpu_fits(box, res.gpu, res.gpu_alternatives, facts))
    for name, have in (("cpus", facts.get("cpus")), ("mem", facts.get("mem_kb")),
                       ("disk", facts.get("disk_free_kb"))):
        want = getattr(res, name)
        if not want:
            continue
        need = float(want) if name == "cpus" else size_gb(str(want))
        if not isinstance(have, int):
            fit.unchecked.append(name)
            continue
        has = have if name == "cpus" else have / 1024 ** 2
        what = "free under " + box.data_dir if name == "disk" else "on the box"
        if has < need:
            raise UserError(f"resources.{name} {want}: {box.name} has {_amount(name, has)} "
                            f"{what}; pick a bigger box or lower the request (or "
                            "--skip-resource-check)")
        fit.checked.append(f"{name} {want} ✓ ({_amount(name, has)} {what})")
    return fit


def measure(transport, box: Box) -> dict:
    """cpus, memory, free disk under the data dir and the GPUs' names, in one round trip;
    the answer is bounded and read line by line, never trusted beyond its shape."""
    data = shlex.quote(box.data_dir)
    script = (
        "echo cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null); "
        "echo mem_kb=$(awk '/^MemTotal:/{print $2}' /proc/meminfo 2>/dev/null || "
        "echo $(( $(sysctl -n hw.memsize 2>/dev/null || echo 0) / 1024 ))); "
        f"mkdir -p {data} 2>/dev/null; "
        f"echo disk_free_kb=$(df -Pk {data} 2>/dev/null | awk 'NR==2{{print $4}}'); "
        "if out=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1); then "
        "printf '%s\\n' \"$out\" | sed 's/^/gpu=/'; else "
        "printf 'gpu_error=%s\\n' \"$(printf '%s' \"$out\" | head -n 1)\"; fi"
    )
    answer = transport.run(f"({script}) | head -c {MAX_ANSWER}", check=False, timeout=60)
    facts: dict = {"gpus": []}
    for line in answer.stdout.splitlines()[:200]:
        m = _LINE.match(line.strip())
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip()[:200]
        if key == "gpu":
            facts["gpus"].append(value)
        elif key == "gpu_error":
            facts["gpu_error"] = value or "nvidia-smi failed"
        elif value.isdigit():
            facts[key] = int(value)
    return facts


def _gpu_fits(box: Box, gpu: str, alternatives: list[str], facts: dict) -> str:
    names: list[str] = facts["gpus"]
    for wanted in [gpu, *[a for a in alternatives if a != gpu]]:
        m = GPU_CONSTRAINT.match(wanted)
        model, count = (m.group("model"), int(m.group("count") or 1)) if m else (wanted, 1)
        key = re.sub(r"[^a-z0-9]", "", model.lower())
        matching = [n for n in names if key and key in re.sub(r"[^a-z0-9]", "", n.lower())]
        if len(matching) >= count:
            return f"gpu {wanted} ✓ ({len(matching)}× {matching[0]}, measured now)"
    if not names:
        why = facts.get("gpu_error") or "nvidia-smi listed none"
        raise UserError(f"resources.gpu {gpu}: {box.name} has no GPU ({why[:120]}); run on a "
                        "GPU box, drop resources.gpu to run on its CPU, or "
                        "--skip-resource-check")
    have = ", ".join(sorted({f"{names.count(n)}× {n}" for n in names}))
    raise UserError(f"resources.gpu {gpu}: {box.name} has {have}; pick a box with it, change "
                    "resources.gpu, or --skip-resource-check")


def _amount(name: str, value: float) -> str:
    return f"{value:g} cpus" if name == "cpus" else f"{value:.1f} GB"
