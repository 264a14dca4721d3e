"""The job spec: a portable request for one training job, written once in YAML.

    name: mnist
    workdir: .                 # pushed to the box; relative to this file
    setup: pip install -r requirements.txt
    run: python train.py --ckpt-dir $RGT_CKPT_DIR
    smoke: python train.py --steps 2
    env: {WANDB_MODE: offline}
    secrets: [WANDB_API_KEY]   # names only; values are read here and sent on stdin
    outputs: [out/, ckpt/]     # what pull fetches, hashes and verifies
    checkpoint_dir: $RGT_CKPT_DIR  # the job's checkpoint home, kept across its runs (resume)
    recover: {max_restarts: 3, on: [crashed, preempted]}  # restart a dead trainer by itself
    resources: {gpu: "A100:1", disk: 50G}
    grid: {lr: [0.1, 0.01], seed: [0, 1]}  # a sweep: one cell per combination, `{lr}` in run
    max_parallel: 2            # at most this many cells at once
    slurm: {partition: gpu}    # a platform's own settings: read only by that platform
    kubernetes: {image: reg/img@sha256:…, tolerations: [{key: k, operator: Exists}]}
"""

from __future__ import annotations

import difflib
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from rgt import dstacktask, skytask, yaml12
from rgt.errors import UserError
from rgt.spec_sections import SECTIONS, PlatformSections

GPU_CONSTRAINT = re.compile(r"^(?P<model>[A-Za-z0-9_\-]+)(?::(?P<count>\d+))?$")
SIZE = re.compile(r"^\d+(\.\d+)?\s*[KMGT]i?B?$", re.IGNORECASE)
_SIZE_PARTS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([KMGT])?I?B?", re.IGNORECASE)


def size_gib(size: str | float) -> float | None:
    """A size of the resources vocabulary in GiB, or None when it is not one. K/M/G/T are
    1024-based, as Slurm reads them, on every platform (an `i` changes nothing: 16G = 16Gi, so
    1T is 1,024 GB wherever rgt passes a number of GB); a trailing B changes nothing; a bare
    number is G."""
    if isinstance(size, int | float) and not isinstance(size, bool):
        return float(size) if size >= 0 else None
    match = _SIZE_PARTS.fullmatch(str(size).strip())
    if not match:
        return None
    return float(match[1]) * 1024.0 ** ("KMGT".index((match[2] or "G").upper()) - 2)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TORCH_PACKAGES = re.compile(r"^(torch|torchvision|torchaudio)([=<>!~\[;].*)?$", re.IGNORECASE)


class Resources(BaseModel):
    """The one resources vocabulary: the same words in a spec and as `rgt up` flags; each
    platform maps them (`Platform.supports`) or refuses a field by name before renting."""

    model_config = ConfigDict(extra="forbid")

    gpu: str | None = Field(default=None, description="a constraint such as A100:1 or H100:8")
    cpus: int | None = Field(default=None, ge=1)
    mem: str | None = None
    disk: str | None = None
    image: str | None = Field(default=None, description="a container image, e.g. "
                                                        "pytorch/pytorch:2.4.0-cuda12.4")
    region: str | None = None
    spot: bool = Field(default=False, description="interruptible / preemptible capacity")
    bid: float | None = Field(default=None, gt=0, description="USD per hour, spot only")
    nodes: int = Field(default=1, ge=1)
    time: str | None = Field(default=None, description="walltime, e.g. 01:30:00 (Slurm)")
    # other GPUs the job also runs on, first preferred (a SkyPilot task's list or set); `gpu`
    # is the first of them
    gpu_alternatives: list[str] = []

    @field_validator("disk", "mem", mode="before")
    @classmethod
    def _gigabytes(cls, value: Any) -> Any:
        """A bare number is GB (as SkyPilot's memory and disk_size)."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{value:g}G"
        return value

    @field_validator("gpu_alternatives")
    @classmethod
    def _gpus(cls, value: list[str]) -> list[str]:
        bad = [g for g in value if not GPU_CONSTRAINT.match(g)]
        if bad:
            raise ValueError(f"expected MODEL or MODEL:COUNT, e.g. A100:1, not {bad[0]!r}")
        return value

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str | None) -> str | None:
        if value is not None and not GPU_CONSTRAINT.match(value):
            raise ValueError("expected MODEL or MODEL:COUNT, e.g. A100:1")
        return value

    @field_validator("disk", "mem")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None and not SIZE.match(str(value)):
            raise ValueError("expected a size such as 50G or 512M")
        return value

    @property
    def gpu_count(self) -> int:
        if not self.gpu:
            return 0
        match = GPU_CONSTRAINT.match(self.gpu)
        assert match is not None
        return int(match["count"] or 1)


RECOVER_CAUSES = ("crashed", "preempted")
CKPT_HOME_VARIABLES = ("$RGT_CKPT_DIR", "${RGT_CKPT_DIR}")
URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


class Recover(BaseModel):
    """Restart the trainer on the box when it dies, from its checkpoint home.

    `crashed`: a non-zero exit or a kill (OOM, SIGKILL) the runner did not ask for;
    `preempted`: exit 85 (rgt.ckpt's "checkpointed on a notice, requeue me"). A stop the user
    or the platform asked for (the runner itself got SIGTERM) is never restarted.
    """

    model_config = ConfigDict(extra="forbid")

    max_restarts: int = Field(default=3, ge=0, le=100)
    on: list[str] = list(RECOVER_CAUSES)
    backoff_s: float = Field(default=10, ge=0, le=3600)

    @field_validator("on")
    @classmethod
    def _causes(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if c not in RECOVER_CAUSES]
        if bad:
            raise ValueError(f"unknown causes {bad}; expected some of {list(RECOVER_CAUSES)}")
        return value


class JobSpec(PlatformSections):
    """The job: the fields below, and each platform's own section (rgt.spec_sections)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    workdir: Path = Path(".")
    setup: str = ""
    run: str = Field(min_length=1)
    smoke: str | None = None
    smoke_timeout: float = Field(default=300, gt=0)
    env: dict[str, str] = {}
    secrets: list[str] = []
    outputs: list[str] = []
    # The job's checkpoint home, shared by every run of the job so a relaunch resumes:
    # `$RGT_CKPT_DIR` (rgt's home on the durable tier: <DURABLE>/rgt/jobs/<name>/ckpt), an
    # absolute path on the box, or an object-store URL the trainer mirrors to (exported as
    # RGT_CKPT_URL; the home stays on the durable tier). Declaring it makes pull fetch it.
    checkpoint_dir: str | None = None
    recover: Recover | None = None
    resources: Resources = Resources()
    exclude: list[str] = [".git", "__pycache__", "*.pyc", ".venv"]
    # A sweep: the cartesian product of these values, one cell each (a scheduler's job array);
    # `{name}` in `run` is replaced by the cell's value, RGT_PARAM_<NAME> is exported, and
    # each cell writes its `outputs` under its own $RGT_OUT_DIR (the cells share the workdir).
    grid: dict[str, list[str | int | float | bool]] = {}
    max_parallel: int | None = Field(default=None, ge=1)
    # The format the spec was read from. A SkyPilot or dstack task's `run` is a script that
    # runs once on every node and starts its own workers (from SKYPILOT_*/DSTACK_* variables),
    # as those tools run it; an rgt spec's `run` on several nodes is one worker, for which rgt
    # starts torchrun (the platform's step command).
    dialect: Literal["rgt", "skypilot", "dstack"] = "rgt"

    @field_validator("setup", mode="before")
    @classmethod
    def _setup_lines(cls, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):  # YAML's true/false/null as a shell reads them, not Python's
            return {str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in value.items()}
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        _require_names(value, "not valid environment variable names")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        _require_names(value, "secrets are environment variable NAMES, not values")
        return value

    @field_validator("grid")
    @classmethod
    def _grid(cls, value: dict[str, list]) -> dict[str, list]:
        _require_names(value, "grid parameters must be identifiers")
        empty = [k for k, v in value.items() if not v]
        if empty:
            raise ValueError(f"grid parameters need at least one value: {empty}")
        return value

    @field_validator("checkpoint_dir")
    @classmethod
    def _checkpoint_home(cls, value: str | None) -> str | None:
        if value is None or value in CKPT_HOME_VARIABLES or value.startswith("/") or \
                URL.match(value):
            return value
        raise ValueError(f"{value!r} would live inside one run's code copy and be lost to the "
                         "next run; use $RGT_CKPT_DIR (the job's home on the durable tier), an "
                         "absolute path on the box, or an object-store URL such as s3://b/p")

    @property
    def checkpoint_url(self) -> str | None:
        """The object-store URL the job mirrors its checkpoints to, if it names one."""
        return self.checkpoint_dir if self.checkpoint_dir and URL.match(self.checkpoint_dir) \
            else None

    @field_validator("outputs")
    @classmethod
    def _relative_outputs(cls, value: list[str]) -> list[str]:
        bad = [p for p in value if p.startswith("/") or ".." in Path(p).parts]
        if bad:
            raise ValueError(f"outputs are paths inside the workdir, got {bad}")
        return value


def _require_names(names, message: str) -> None:
    bad = [k for k in names if not ENV_NAME.match(k)]
    if bad:
        raise ValueError(f"{message}: {bad}")


def load_spec(path: Path, *, overrides: Any = None) -> JobSpec:
    """Read and validate a job spec; the workdir is resolved relative to the file. `overrides`:
    the command line's --infra / --instance-type for a SkyPilot task (rgt.skycloud)."""
    try:
        documents = [d for d in yaml12.load_all(path.read_text(encoding="utf-8"))
                     if d is not None]
    except FileNotFoundError:
        raise UserError(f"job spec {path} does not exist") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; give the job spec file (e.g. "
                        f"{path}/job.yaml)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read job spec {path}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)  # 0-based; editors count from 1
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"{where}: not valid YAML: {problem}") from None
    data = documents[0] if len(documents) == 1 else None
    if len(documents) > 1 and all(isinstance(d, dict) for d in documents):
        raise UserError(f"{path} {skytask.several_documents(documents)}")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with at least `name` and `run`")
    # a SkyPilot or dstack task file, read as that tool reads it (rgt.skytask, rgt.dstacktask)
    dialect = dstacktask if dstacktask.is_dstack(data) else \
        skytask if skytask.is_skypilot(data) else None
    if overrides is not None and dialect is not skytask:  # said, not refused: nothing to do
        what = "a dstack task" if dialect is dstacktask else "an rgt spec"
        print(f"note: {path.name}: --infra and --instance-type override a SkyPilot task's "
              f"placement; {what} runs on the box you name as it is", file=sys.stderr)
    if dialect is not None:
        try:
            data, notes = (dstacktask.to_spec(data, path=path) if dialect is dstacktask else
                           skytask.to_spec(data, default_name=path.stem,
                                                           overrides=overrides))
        except UserError as err:
            text = str(err)
            raise UserError(f"{path} {text}" if text.startswith("is ") else
                            f"{path}: {text}") from None
        for note in notes:  # what the file asks for that rgt takes as it is, said once
            print(f"note: {path.name}: {note}", file=sys.stderr)
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as err:
        raise UserError(f"{path}: {_explain(err)}") from None
    workdir = (path.parent / spec.workdir).resolve()
    if not workdir.is_dir():
        raise UserError(f"{path}: workdir {workdir} is not a directory")
    return spec.model_copy(update={"workdir": workdir})


def _explain(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        message = "is required"
    elif first["type"] == "extra_forbidden":
        model = _model_at(first["loc"][:-1])
        known = _field_order(model)
        close = difflib.get_close_matches(str(first["loc"][-1]), known, n=1)
        message = (f"is not a known field; did you mean `{close[0]}`?" if close else
                   f"is not a known field ({', '.join(known)})")
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"field `{where}` {message}{more}"


def _model_at(loc: tuple) -> type[BaseModel]:
    """The model whose field list a misspelt key at `loc` belongs to (a section, a list's
    item: `kubernetes.tolerations.0` is a toleration)."""
    model: type[BaseModel] = JobSpec
    for part in loc:
        if isinstance(part, int):
            continue
        inner = model.model_fields.get(str(part))
        found = [t for t in _types(inner.annotation if inner else None)
                 if isinstance(t, type) and issubclass(t, BaseModel)]
        if not found:
            break
        model = found[0]
    return model


def _types(annotation: Any) -> list[Any]:
    """The classes inside an annotation (`Toleration` in `list[Toleration] | None`)."""
    inner = getattr(annotation, "__args__", None)
    if not inner:
        return [annotation]
    return [t for arg in inner for t in _types(arg)]


def _field_order(model: type[BaseModel]) -> list[str]:
    """A model's fields as its class lists them; the platforms' sections after `resources`,
    where the job spec's own list has always named them."""
    names = list(model.model_fields)
    if model is not JobSpec:
        return names
    own = [n for n in names if n not in SECTIONS]
    at = own.index("resources") + 1
    return own[:at] + list(SECTIONS) + own[at:]


def drop_torch_installs(setup: str) -> tuple[str, list[str]]:
    """Remove torch/torchvision/torchaudio from `pip install` lines (AD9, LAM7).

    On an image whose PyTorch is the environment, reinstalling torch pulls a mismatched CUDA
    build or shadows the system one. Returns the new setup and what was dropped.
    """
    dropped: list[str] = []
    kept_lines = []
    for line in setup.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            kept_lines.append(line)
            continue
        if "pip" not in " ".join(words[:3]) or "install" not in words:
            kept_lines.append(line)
            continue
        start = words.index("install") + 1
        packages = [w for w in words[start:] if TORCH_PACKAGES.match(w)]
        if not packages:
            kept_lines.append(line)
            continue
        dropped.extend(packages)
        rest = [w for w in words[start:] if w not in packages]
        if any(not w.startswith("-") for w in rest):
            kept_lines.append(shlex.join(words[:start] + rest))
    return "\n".join(kept_lines), dropped
