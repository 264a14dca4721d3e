"""The shape every platform profile fills.

A profile is data, not code: the facts a careful operator would otherwise look up in a
platform's docs before trusting it with a week of training. The verbs read these facts
(which tier survives the meter-stop verb, what keeps billing, how a job detaches) instead of
branching on the platform's name.

Validation is strict (unknown keys are errors) because a typo in a money-affecting fact
must fail loudly, not silently fall back to a default.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

GOTCHA_ID = re.compile(r"^(?:LAM|AD|VAST|GEN|SLURM|K8S|NB|RP|LOC|U)\d+$|^AD-DANGER$")
UNIVERSAL_ID = re.compile(r"^U\d+$")
OVERRIDE_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")

Kind = Literal["local", "ssh", "ssh-rental", "cloud-api", "slurm", "kubernetes", "notebook"]
# A fact that is a plain yes/no on most platforms but on marketplaces depends on the host.
Tri = bool | Literal["host-dependent", "image-dependent", "plan-dependent", "n/a"]
Survives = bool | Literal["partial", "n/a"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Citation(Strict):
    """Where a fact comes from, and when it was last checked against that source.

    `doc` names a seed file and section (`seeds/001 (AutoDL) §5 TEARDOWN / BILLING`), the
    reference catalog, or a public page. A fact no source states is still carried when it
    follows from ones that are, marked `inference: true` with `doc` saying what it follows
    from, so a reader can tell what was read from what was reasoned.
    """

    doc: str = Field(description="doc page, thread or article the fact comes from")
    verified: str | None = Field(
        default=None, pattern=r"^\d{4}-\d{2}(-\d{2})?$", description="YYYY-MM[-DD]"
    )
    inference: bool = Field(default=False, description="reasoned from other facts, not read")


class Facts(Strict):
    """The frontmatter: the one-line answers a user needs before renting."""

    platform: str
    kind: Kind
    meter_stop_verb: str
    meter_stop_irreversible: bool
    detach_primitive: str
    spot_available: Tri
    spot_grace: str = Field(description="e.g. '~0s', '30s (KillWait)', 'n/a'")
    shared_fs: Tri
    inode_cap: str = Field(description="'none', '~200K', 'host-dependent' …")
    free_egress: Tri
    china_mirror_needed: Tri
    host_driver_cuda_max: str
    local_nvme: Tri
    # What core code does differently per platform, as facts it reads (it never names one):
    # how using a box is billed: "hourly" (money while it is up, so an idle box costs) or
    # "allocation" (a scheduler's walltime and fair-share per job; an idle login node is free)
    billing: Literal["hourly", "allocation"] = "hourly"
    # jobs run on other nodes than the one rgt reaches (a scheduler's compute nodes): they read
    # each run's code and script from the shared durable tier, so run dirs go there
    jobs_on_other_nodes: bool = False
    # `rgt up` without --ssh/--host may register this machine (a cluster's login node rgt
    # runs on); otherwise a profile that is not `local` needs a connection
    registers_this_machine: bool = False

    @model_validator(mode="before")
    @classmethod
    def _scheduler_defaults(cls, data: object) -> object:
        """A profile of the user's own with `kind: slurm` gets the scheduler's answers to the
        three facts above unless it gives its own (they were implied by the kind before)."""
        if isinstance(data, dict) and data.get("kind") == "slurm":
            data = {"billing": "allocation", "jobs_on_other_nodes": True,
                    "registers_this_machine": True, **data}
        return data


class EntryPoint(Strict):
    kind: Literal["console", "cli", "rest", "ssh", "sdk", "notebook", "scheduler", "local"]
    where: str
    notes: str = ""


class EnvContract(Strict):
    """What the Python environment on the box *is*, and what must not be done to it."""

    summary: str
    python: str = Field(description="interpreter command on the box")
    conda_create_forbidden: bool
    pip_install_torch_forbidden: bool
    notes: str = ""


class Launch(Strict):
    entry_points: list[EntryPoint] = Field(min_length=1)
    env_contract: EnvContract
    verify_command: str
    notes: str = ""
    sources: list[Citation] = []


class Tier(Strict):
    """One storage tier and, for every action of the platform, whether its data survives."""

    name: str
    path: str
    speed: str = ""
    cap: str = ""
    inode_cap: str = ""
    scope: str = Field(default="", description="per-instance, per-host, region-locked, shared …")
    billing: str = ""
    survives: dict[str, Survives]
    survival_notes: dict[str, str] = {}
    notes: str = ""


class Storage(Strict):
    tiers: list[Tier] = Field(min_length=1)
    checkpoint_tier: str = Field(description="tier checkpoints must go to for the meter-stop verb")
    notes: str = ""
    sources: list[Citation] = []


class Billing(Strict):
    """Something that keeps costing money after an action."""

    what: str
    rate: str = ""
    until: str = ""


class Timer(Strict):
    """A clock an action starts, e.g. AutoDL releases a stopped box after 15 days."""

    after: str
    seconds: int | None = Field(default=None, ge=0)
    effect: str


class Action(Strict):
    name: str
    aliases: list[str] = []
    how: str = ""
    stops_compute_meter: bool
    stops_storage_meter: bool
    irreversible: bool
    keeps_billing: list[Billing] = []
    timer: Timer | None = None
    notes: str = ""
    sources: list[Citation] = []


class Network(Strict):
    proxy_hook: str | None = None
    mirror_env: dict[str, str] = {}
    ssh: list[str] = Field(default_factory=list, description="SSH flavours the platform offers")
    port_exposure: str = ""
    ip_changes_on_recreate: Tri = "n/a"
    ports_change_on_recreate: Tri = "n/a"
    egress: str = ""
    notes: str = ""
    sources: list[Citation] = []


class Spot(Strict):
    model: str
    detection: str = ""
    grace_seconds: int | None = Field(default=None, ge=0)
    resume_hook: str = ""
    notes: str = ""
    sources: list[Citation] = []


class DaemonSurvival(Strict):
    ssh_drop: Survives
    reboot: Survives
    container_restart: Survives


class Daemon(Strict):
    primitive: str
    fallback: str | None = None
    survives: DaemonSurvival
    native_orchestration: str = ""
    notes: str = ""
    sources: list[Citation] = []


class Probe(Strict):
    """A command whose output, matched by a regex, means the gotcha is present."""

    command: str
    matches: str
    example_output: str

    @model_validator(mode="after")
    def _example_matches(self) -> Probe:
        _check_regex(self.matches, self.example_output)
        return self


class Detect(Strict):
    """How a program recognises the gotcha: regexes over logs/output, and/or a probe."""

    patterns: list[str] = []
    examples: list[str] = Field(default=[], description="real lines the patterns must match")
    probe: Probe | None = None

    @model_validator(mode="after")
    def _usable(self) -> Detect:
        if not self.patterns and self.probe is None:
            raise ValueError("a detect block needs patterns or a probe")
        if self.patterns and not self.examples:
            raise ValueError("detect.patterns need at least one example line")
        for pattern in self.patterns:
            if not any(_matches(pattern, line) for line in self.examples):
                raise ValueError(f"regex {pattern!r} matches none of its examples")
        for line in self.examples:
            if not any(_matches(pattern, line) for pattern in self.patterns):
                raise ValueError(f"example {line!r} is matched by no pattern")
        return self

    def matches(self, text: str) -> bool:
        return any(re.search(pattern, text, re.IGNORECASE) for pattern in self.patterns)


class Gotcha(Strict):
    id: str
    title: str
    symptom: str = Field(min_length=1)
    cause: str = Field(min_length=1)
    fix: str = Field(min_length=1)
    theme: str = ""
    detect: Detect | None = None
    see_also: list[str] = []
    sources: list[Citation] = []

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not GOTCHA_ID.match(value):
            raise ValueError(f"gotcha id {value!r} is not of the form LAM1, AD-DANGER, U7 …")
        return value


class DebugCommand(Strict):
    purpose: str
    command: str
    reading: str = Field(description="what each answer means")


class Surface(Strict):
    """Principle 10: what to tell the user on first contact with the platform."""

    danger_clocks: list[str] = Field(min_length=1)
    conveniences: list[str] = []


class Profile(Strict):
    name: str
    title: str
    summary: str
    facts: Facts
    surface: Surface
    launch: Launch
    storage: Storage
    actions: list[Action] = Field(min_length=1)
    network: Network
    spot: Spot
    daemon: Daemon
    gotchas: list[Gotcha] = []
    universal_refs: list[str] = []
    debugging: list[DebugCommand] = []
    overrides: dict[str, str] = {}
    override_notes: list[str] = []
    sources: list[Citation] = []

    @field_validator("universal_refs")
    @classmethod
    def _universal_ids(cls, refs: list[str]) -> list[str]:
        bad = [ref for ref in refs if not UNIVERSAL_ID.match(ref)]
        if bad:
            raise ValueError(f"universal_refs must be U-ids, got {bad}")
        return refs

    @field_validator("overrides")
    @classmethod
    def _override_keys(cls, overrides: dict[str, str]) -> dict[str, str]:
        bad = [key for key in overrides if not OVERRIDE_KEY.match(key)]
        if bad:
            raise ValueError(f"override names must be UPPER_SNAKE, got {bad}")
        return overrides

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        """Cross-section rules: the facts a verb relies on must not contradict each other."""
        if self.name != self.facts.platform:
            raise ValueError(
                f"name {self.name!r} differs from facts.platform {self.facts.platform!r}")
        names = [action.name for action in self.actions]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate action names in {names}")
        stop = self.action(self.facts.meter_stop_verb)
        if stop is None:
            raise ValueError(
                f"meter_stop_verb {self.facts.meter_stop_verb!r} is not in actions {names}"
            )
        if stop.irreversible != self.facts.meter_stop_irreversible:
            raise ValueError(
                f"meter_stop_irreversible={self.facts.meter_stop_irreversible} but action "
                f"{stop.name!r} says irreversible={stop.irreversible}"
            )
        if not stop.stops_compute_meter:
            raise ValueError(f"meter-stop action {stop.name!r} must stop the compute meter")
        tiers = {tier.name: tier for tier in self.storage.tiers}
        if len(tiers) != len(self.storage.tiers):
            raise ValueError(f"duplicate tier names in {[t.name for t in self.storage.tiers]}")
        for tier in tiers.values():
            missing = [n for n in names if n not in tier.survives]
            unknown = [a for a in tier.survives if a not in names]
            if missing or unknown:
                raise ValueError(
                    f"tier {tier.name!r} survival matrix: missing actions {missing}, "
                    f"unknown actions {unknown}"
                )
        home = tiers.get(self.storage.checkpoint_tier)
        if home is None:
            raise ValueError(
                f"checkpoint_tier {self.storage.checkpoint_tier!r} is not a tier ({list(tiers)})"
            )
        if home.survives[stop.name] is not True:
            raise ValueError(
                f"checkpoint tier {home.name!r} does not survive the meter-stop verb {stop.name!r}"
            )
        ids = [g.id for g in self.gotchas]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate gotcha ids in {ids}")
        self._placements_honour_the_facts(home)
        return self

    def _placements_honour_the_facts(self, home: Tier) -> None:
        """rgt acts on two overrides, not on the facts beside them: checkpoint homes go under
        DURABLE_DIR and on-box scripts run with env_contract.python. So those must say what
        checkpoint_tier and PY say, or a profile would describe one placement and rgt use
        another."""
        durable = self.overrides.get("DURABLE_DIR", "").split()
        tier_path = home.path.split()
        if durable and tier_path and _is_box_path(tier_path[0]) and _is_box_path(durable[0]):
            root, inner = tier_path[0].rstrip("/") or "/", durable[0]
            if not (inner == root or inner.startswith(root.rstrip("/") + "/")):
                raise ValueError(
                    f"overrides.DURABLE_DIR {inner!r} (where rgt puts checkpoint homes) is not "
                    f"on checkpoint_tier {home.name!r} ({root})")
        python = self.launch.env_contract.python.split()
        if "PY" in self.overrides and python and self.overrides["PY"] != python[0]:
            raise ValueError(
                f"overrides.PY {self.overrides['PY']!r} differs from launch.env_contract.python "
                f"{python[0]!r}, the interpreter rgt finds first at `up`")

    def action(self, name: str) -> Action | None:
        """Find an action by name or alias (关机 and shutdown name the same AutoDL action)."""
        for action in self.actions:
            if name == action.name or name in action.aliases:
                return action
        return None

    @property
    def meter_stop(self) -> Action:
        action = self.action(self.facts.meter_stop_verb)
        assert action is not None  # guaranteed by validation
        return action


class UniversalCatalog(Strict):
    """The platform-independent gotchas U1…U44, referenced from profiles by id."""

    gotchas: list[Gotcha] = Field(min_length=1)
    sources: list[Citation] = []


def _is_box_path(path: str) -> bool:
    """An absolute path on the box (placeholders rgt fills at `up` allowed), not a bucket URL
    or a description such as "the user's own machine"."""
    return path.startswith(("/", "$HOME", "${HOME}", "~", "{RGT_HOME}")) and "://" not in path


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text, re.IGNORECASE) is not None
    except re.error as err:
        raise ValueError(f"regex {pattern!r} does not compile: {err}") from err


def _check_regex(pattern: str, example: str) -> None:
    if not _matches(pattern, example):
        raise ValueError(f"regex {pattern!r} does not match its example {example!r}")
