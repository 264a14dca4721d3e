"""Each platform's own section of a job spec (`slurm:`, `kubernetes:`): its fields and checks.

A spec is parsed below the platforms (rgt.spec sits under them: the layering test), so the
models of the sections live here, one table (`SECTIONS`) naming each, and `JobSpec` takes its
section fields from `PlatformSections`: rgt.spec itself names no platform. A platform says which
sections it reads (`Platform.spec_sections`); a spec's section for another platform is refused
by name before anything runs (rgt.platforms.base.refuse_foreign_sections). A new platform with
settings of its own adds its model and one line to `SECTIONS` and `PlatformSections`.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class SlurmSettings(BaseModel):
    """`slurm:` in a spec: what a cluster asks of each job beyond the resources."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    modules: list[str] = Field(default=[], description="`module load` each, before setup")
    sbatch_args: list[str] = Field(default=[], description="more #SBATCH words, as typed")

    @field_validator("sbatch_args", "modules", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    @field_validator("partition", "account", "qos", "constraint")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value)):
            raise ValueError("expected one word, e.g. gpu")
        return value


IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
RESERVED_LABELS = ("app.kubernetes.io/managed-by", "rgt.dev/")  # rgt finds its objects by these


def _label_key(key: str) -> bool:
    """A Kubernetes label key: [DNS-subdomain prefix/]name, the name 1-63 characters."""
    prefix, _, name = key.rpartition("/")
    return bool(name) and bool(LABEL_NAME.match(name)) and (
        not prefix or (len(prefix) <= 253 and bool(DNS_SUBDOMAIN.match(prefix))))


class Toleration(BaseModel):
    """One core/v1 Toleration, with the API server's own field names and rules."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None
    tolerationSeconds: int | None = None  # noqa: N815 (the API's spelling)

    @field_validator("operator")
    @classmethod
    def _operator(cls, value: str) -> str:
        if value not in ("Equal", "Exists"):
            raise ValueError("operator is Equal or Exists")
        return value

    @field_validator("effect")
    @classmethod
    def _effect(cls, value: str | None) -> str | None:
        if value is not None and value not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError("effect is NoSchedule, PreferNoSchedule or NoExecute")
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value and not _label_key(value):
            raise ValueError(f"{value!r} is not a valid taint key")
        return value

    @model_validator(mode="after")
    def _as_the_api_server_checks(self) -> Toleration:
        # what the API server would refuse at submit time, said here instead
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists takes no value")
        if not self.key and self.operator != "Exists":
            raise ValueError("a toleration without a key needs operator: Exists")
        if self.tolerationSeconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds applies only to effect: NoExecute")
        return self

    def manifest(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class KubernetesSettings(BaseModel):
    """`kubernetes:` in a spec: what a cluster asks of this job's pods beyond the resources.

    The namespace is the box's (its PVC lives there, and a pod mounts only a claim of its own
    namespace): `rgt up --namespace` chooses it, a job cannot."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(default=None, description="registry/name@sha256:<digest>; "
                                                        "overrides the box's")
    service_account: str | None = None
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    priority_class: str | None = None
    labels: dict[str, str] = {}

    @field_validator("image")
    @classmethod
    def _pinned(cls, value: str | None) -> str | None:
        if value is not None and not IMAGE_DIGEST.search(value):
            raise ValueError(f"image {value!r} is not pinned by digest (a tag moves and the "
                             "next pod may run other code); use name@sha256:<digest>")
        return value

    @field_validator("service_account", "priority_class")
    @classmethod
    def _object_name(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 253 or not DNS_SUBDOMAIN.match(value)):
            raise ValueError(f"{value!r} is not a Kubernetes object name (lowercase "
                             "letters, digits, '-' and '.')")
        return value

    @field_validator("node_selector", "labels", mode="before")
    @classmethod
    def _string_values(cls, value: Any) -> Any:
        if isinstance(value, dict):  # YAML reads `gpu: true` or `tier: 1` as non-strings
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in value.items()}
        return value

    @field_validator("node_selector", "labels")
    @classmethod
    def _label_pairs(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not _label_key(key):
                raise ValueError(f"{key!r} is not a valid label key")
            if not LABEL_NAME.match(text):
                raise ValueError(f"{key}: {text!r} is not a valid label value (63 characters "
                                 "of letters, digits, '-', '_' and '.')")
        return value

    @field_validator("labels")
    @classmethod
    def _not_rgts(cls, value: dict[str, str]) -> dict[str, str]:
        taken = [k for k in value if k == RESERVED_LABELS[0] or k.startswith(RESERVED_LABELS[1])]
        if taken:
            raise ValueError(f"{taken[0]} is rgt's own label (it finds the job's pods by it)")
        return value


class PlatformSections(BaseModel):
    """The sections of `JobSpec` that only one platform reads; None: not given."""

    slurm: SlurmSettings | None = None  # a Slurm cluster's settings (partition, account …)
    kubernetes: KubernetesSettings | None = None  # a cluster's pod settings (image, tolerations)


# section → its model; the words that say which box reads it (in refusals)
SECTIONS: dict[str, type[BaseModel]] = {"slurm": SlurmSettings,
                                        "kubernetes": KubernetesSettings}
READERS: dict[str, str] = {"slurm": "a slurm box", "kubernetes": "a kubernetes box"}
