"""The one contract every platform implements, and the records its verbs return.

The API, as the lifecycle calls it (every profile has a platform: `platform_for(profile)`):

    class Platform(ABC):
        name: str                          # the profile name it serves ("kubernetes")
        supports: frozenset[str]           # the `Resources` fields it maps (gpu, cpus, mem, …)
        profile: str                       # set by the constructor: Platform(profile=None)
        restart_hook: str                  # what relaunches unfinished runs when a paused
                                           # machine starts again ("vast.ai onstart"); "" none
        spec_sections: frozenset[str]      # its own spec sections ("slurm"); others refused
        has_shell: bool                    # rgt can run commands on the box (False: Colab,
                                           # Kaggle; `rgt audit` then measures nothing there)

        # required ------------------------------------------------------------------------
        connect(box) -> Transport
            How commands and files reach the box (SSH, this machine, kubectl exec …). The
            caller closes it. Every verb below that takes a transport got it from here.
        provision(store, request: Request) -> Box
            `rgt up`: register a machine the user has, or rent one, and store it as a Box
            (store.add_box). Check `request.resources` with `refuse_unsupported` and refuse
            anything else it cannot honour BEFORE renting. Record a rented instance in the store
            (store.record("cloud-launch", …)) the moment it exists: it bills from there.
        launch(transport, box, spec: JobSpec, layout: Layout, *, dependency=None) -> Launched
            Start a run whose code, secrets (RUN_DIR/secrets.env) and rgt.ckpt (layout.lib) the
            lifecycle already pushed to `layout`. Returns how it is detached and, for a platform
            whose own scheduler tracks the run, the `platform_run` record `state` reads back.
        state(store, box, run, transport) -> dict
            The run's state as `rgt.remote.summary.summarize` shapes it (start from
            `summarize({})` and fill what you know). Never trust a claim from the box unchecked:
            reconcile it with the real process / job / pod.
        logs(transport, box, run, *, lines=None, cell=None, since_byte=None) -> str
            The run's log text: all of it, the last `lines` lines, or everything from byte
            `since_byte` on (`rgt watch --follow` streams with it, from 0); `cell` picks one
            cell of a sweep. A run with no log yet: a UserError saying so.
        fetch(transport, box, run, remote, local, *, exclude=(), progress=None) -> TransferStats
            Bring one directory of the run (`remote`, on the box) into `local` on the laptop,
            leaving out what `exclude` matches (rsync-style patterns, as `Transport.get`
            takes them: a leading / anchors one at `remote`; the checkpoints a pull leaves on
            the box, the box's own records).
            `rgt pull` calls it for each source, then verifies every file itself: the trust
            boundary (rgt.lifecycle.untrusted) stays in the lifecycle, never in a platform.
        release(store, box) -> Released
            The profile's meter-stop verb (terminate, destroy, scancel; or nothing to stop).
            Say what happened and what still bills afterwards. Called by `rgt down` only after
            the Iron Law passed: a platform never decides whether teardown is safe.
        audit_extras(transport, box) -> dict
            What `rgt audit` adds for this platform: {section: {..., "verdicts": [{level:
            ok|warn|fail, id, message}]}} (Slurm: {"scheduler": partitions, limits …}); {} when
            there is nothing to add.
        stops_meter(box) -> bool            (has a default: False)
            Whether `release` stops this box's meter itself; False makes `rgt down` show the
            console step and ask the user to confirm they did it.

        # optional (`Ability`; the lifecycle asks `Ability.X in platform.abilities()`) --------
        # A platform has one by overriding the method; `Platform`'s own raises. Each one it
        # lacks comes with the reason (`abilities().why_not(...)`, `lacks` to word it).
        dependency_on(earlier: Run) -> str
            The scheduler option that starts a run once `earlier` succeeded (`rgt run
            --after`); having it also means the platform runs sweeps (`grid`) as one array.
        gate(store, box, run) -> dict | None
            Asked by `rgt watch` before connecting: None when the box can be asked as usual,
            else the run's summary while the machine cannot run it (a preempted instance →
            "paused" with the cause). Never a terminal status for a run that may go on.
        cancel(transport, box, run, grace_s) -> dict | None
            `rgt cancel` for a run the platform's own scheduler holds (Slurm: scancel; a
            Kubernetes Job: delete it, its pods get SIGTERM and their grace). Returns
            {"sent": [what was done], "escalated": bool}, or None for a run the on-box runner
            holds, which the lifecycle stops itself (SIGTERM, SIGKILL after grace_s).
        teardown(store, box) -> Teardown
            What `release` will do to THIS box, for `rgt down`'s panel before the user
            confirms, where the profile's tiers would tell it wrong or not all of it (a PVC
            rgt created goes with the box; which disk /workspace is on this pod). Says only;
            whether teardown may run stays `rgt down`'s decision.
        render(box, spec, run_id, *, dependency=None) -> str
            What `launch` would submit (an sbatch script; multi-document YAML manifests), for
            `rgt render` and `rgt run --dry-run`. Runs nothing, touches no box.
        offers(query: OfferQuery) -> Offers
            `rgt offers --profile P`: what the platform would rent right now for the query
            (vast.ai's offers, Lambda's instance types with capacity, RunPod's GPU stock), as
            one table. A platform without it has nothing to list (the CLI says so, exit 2).
        cloud_status(store, box) -> dict
            `rgt cloud-status`: what the control plane's API says about a rented box's
            instance: {"instance_id", "state" or "status", "advice", "gotcha"?, "status_msg"?,
            "billing"?}. Only for a box rgt rented (box.extra["instance_id"]).
        cancel_grace(box, run) -> float | None
            The seconds between SIGTERM and SIGKILL that `cancel` will really give a run the
            platform's scheduler holds, read back from it (a Kubernetes Job's pods:
            terminationGracePeriodSeconds); None when it cannot tell. `rgt cancel` prints this
            one, never a default the platform does not apply.

`SshPlatform` (rgt.platforms.ssh) implements every required verb for a box that answers SSH
or is this machine: register the target, the detached on-box runner, the probe, `tail` for
logs, rgt's own transfer engine for fetch, and release = nothing rgt can stop. A platform
for a rented SSH box subclasses it and overrides `provision` and `release` (Lambda, vast.ai),
or `launch`/`state` (Slurm). Everything a platform needs from below lives in `rgt.remote`
(reach, register, layout, calls, runner, summary); a platform never imports `rgt.lifecycle`
or `rgt.cli`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rgt.errors import UserError
from rgt.spec import Resources, size_gib
from rgt.spec_sections import READERS
from rgt.store import Box, Run, Store
from rgt.transport import SshTarget, TransferStats, Transport

if TYPE_CHECKING:
    from rgt.remote.layout import Layout
    from rgt.spec import JobSpec


def _quiet(_: str) -> None:
    pass


@dataclass
class Request:
    """What `rgt up` asks a platform for."""

    name: str                                # the box name
    target: SshTarget | None = None          # --ssh / --host: a machine the user already has
    group: list[SshTarget] = field(default_factory=list)  # more --ssh: the group's other nodes
    resources: Resources = field(default_factory=Resources)  # the one vocabulary
    rate: float | None = None                # --rate: what the user pays an hour, if known
    data_dir: str | None = None
    durable_dir: str | None = None
    # the platform's own `rgt up` settings that are not resources: Lambda's ssh_key and
    # filesystem, vast.ai's offer and onstart, secrets, wait_s, identity …
    options: dict[str, Any] = field(default_factory=dict)
    on_wait: Callable[[str], None] = _quiet  # progress lines while waiting on a control plane


@dataclass
class Launched:
    """What `launch` started."""

    detach: str                              # "tmux:rgt-ID", "setsid", "sbatch:123", "pod:x"
    platform_run: dict[str, Any] | None = None  # the platform's own record of the run, if any
    status: str = "starting"
    notes: list[str] = field(default_factory=list)


@dataclass
class Released:
    """What `release` did: one line for the user, and what keeps billing afterwards."""

    what: str
    still_billing: list[str] = field(default_factory=list)


class ReleaseRefused(UserError):
    """`release` looked again and refused before doing anything (a run started meanwhile):
    the teardown `down` recorded is void, and the next `down` judges the box afresh."""


@dataclass
class Teardown:
    """A platform's word on what `release` does to one box, for `rgt down`'s panel. A list left
    None means: as the profile's storage tiers and meter-stop facts say."""

    destroys: list[str] | None = None
    keeps: list[str] | None = None
    still_billing: list[str] | None = None
    notes: list[str] = field(default_factory=list)  # lines the panel adds (why, gotcha ids)


RESOURCE_FIELDS = ("gpu", "cpus", "mem", "disk", "image", "region", "spot", "bid", "nodes",
                   "time")


def asked_for(resources: Resources) -> list[str]:
    """The resource fields the request sets (a default, e.g. nodes=1, asks for nothing)."""
    asked = []
    for name in RESOURCE_FIELDS:
        value = getattr(resources, name)
        if value not in (None, False) and not (name == "nodes" and value == 1):
            asked.append(name)
    return asked


def refuse_unsupported(platform: str, supports: frozenset[str], resources: Resources,
                       where: str = "resources") -> None:
    """One clear error naming the platform and the field it cannot honour: before renting."""
    refused = [name for name in asked_for(resources) if name not in supports]
    if refused:
        honours = ", ".join(n for n in RESOURCE_FIELDS if n in supports) or "none"
        raise UserError(f"{platform} cannot honour {where}.{refused[0]} "
                        f"({getattr(resources, refused[0])!r})"
                        + (f" (nor {', '.join(refused[1:])})" if refused[1:] else "")
                        + f"; it maps: {honours}. Drop it, or pick a platform that has it")


def size_gb(size: str | float, flag: str = "--disk") -> float:
    """A vocabulary size ('50G', '512M', '1T', '1.5Gi', 50) as the number of GB a platform is
    given (rgt.spec.size_gib: 1024-based, 1T = 1,024); one that is not a size names `flag`."""
    gib = size_gib(size)
    if gib is None:
        raise UserError(f"{flag} {size!r}: give a size such as 50G, 1T (1,024 GB) or 512M")
    return gib


def refuse_foreign_sections(platform: Platform, spec: JobSpec) -> None:
    """A spec's `slurm:` on a Kubernetes box (or `kubernetes:` on an SSH box) would be ignored
    there: say so before anything runs."""
    for section, readers in READERS.items():
        if getattr(spec, section, None) is not None and section not in platform.spec_sections:
            raise UserError(f"the spec's `{section}:` section applies only to {readers}; "
                            f"{platform.profile} would ignore it. Drop it from the spec, or "
                            f"run on {readers}")


def refuse_options(platform: str, allowed: set[str], options: dict[str, Any]) -> None:
    """An `rgt up` setting the platform has no use for is named, never ignored."""
    extra = [k for k in options if k not in allowed]
    if extra:
        name = "secret" if extra[0] == "secrets" else extra[0]
        raise UserError(f"--{name.replace('_', '-')} does not apply to --profile {platform} "
                        "(see `rgt up --help` for each platform's settings)")


def refuse_offer_filters(platform: str, allowed: set[str], options: dict[str, Any]) -> None:
    """An `rgt offers` filter the platform has no use for is named, never ignored."""
    extra = [k for k in options if k not in allowed]
    if extra:
        raise UserError(f"--{extra[0].replace('_', '-')} does not apply to `rgt offers "
                        f"--profile {platform}` (see `rgt offers --help`)")


def gpu_choices(resources: Resources) -> list[str]:
    """The GPUs a request accepts, first preferred: `gpu`, then its alternatives (a SkyPilot
    task's list or mapping, or `--gpu A:1,B:1`), each once."""
    choices = [resources.gpu] if resources.gpu else []
    for gpu in resources.gpu_alternatives:
        if gpu not in choices:
            choices.append(gpu)
    return choices


class Unavailable(UserError):
    """A GPU the platform cannot rent now, and nothing was made for it (no stock or offer, a
    create refused for want of machines); `why` says so in a few words."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def first_available(choices: list[str], rent: Callable[[str], Any],
                    on_wait: Callable[[str], None], refuse: Callable[[str], str]) -> Any:
    """`rent` the first of `choices` (GPUs, first preferred) the platform has. A choice `rent`
    refuses as Unavailable made nothing, so the next is tried (never two rented), and the skip
    is said with why. One choice: its own refusal stands. None left: one UserError, worded by
    `refuse` from "GPU: why; GPU: why"."""
    skipped: list[str] = []
    for n, choice in enumerate(choices):
        try:
            return rent(choice)
        except Unavailable as err:
            if len(choices) == 1:
                raise
            skipped.append(f"{choice}: {err.why}")
            if n + 1 < len(choices):
                on_wait(f"skipped {choice}: {err.why}; trying {choices[n + 1]}")
    raise UserError(refuse("; ".join(skipped)))


@dataclass
class OfferQuery:
    """What `rgt offers` asks a platform: the words of the vocabulary that pick a machine, and
    the platform's own filters (vast.ai: min_reliability, unverified; RunPod: cloud) in
    `options`, refused by name by a platform that has no use for them."""

    gpu: str | None = None                   # MODEL or MODEL:COUNT; None: the platform's list
    count: int | None = None                 # GPUs per machine, when `gpu` does not say
    region: str | None = None
    spot: bool = False
    max_price: float | None = None           # USD per hour
    limit: int = 20
    options: dict[str, Any] = field(default_factory=dict)

    def model_and_count(self) -> tuple[str | None, int | None]:
        """`gpu` and `count` as one (MODEL, COUNT): `--gpu H100:2`, or `--gpu H100 --num-gpus
        2`; either may be None when not given. A count given both ways must agree."""
        if not self.gpu:
            return None, self.count
        model, colon, given = self.gpu.rpartition(":")
        if not colon:
            return self.gpu, self.count
        if self.count is not None and self.count != int(given):
            raise UserError(f"--gpu {self.gpu} and --num-gpus {self.count} disagree; give one")
        return model, int(given)


@dataclass
class Offers:
    """What a platform offers for a query, as one table: `rows` are shown under `columns`,
    `records` are the same rows for `--json`; `empty` is the one line said when nothing
    matched, `next` the command that rents one of them."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    empty: str = "nothing matches"
    next: str = ""
    notes: list[str] = field(default_factory=list)


class Ability(Enum):
    """An optional verb of a platform (the module docstring says what each does); the value
    is the method's name. A platform has an ability by overriding that method."""

    DEPENDENCY_ON = "dependency_on"   # chains runs (`--after`) and runs sweeps as one array
    GATE = "gate"                     # says when its machine cannot run the job (preempted)
    CANCEL = "cancel"                 # its scheduler stops a run, not the on-box runner
    CANCEL_GRACE = "cancel_grace"     # its scheduler sets the grace a cancelled run gets
    TEARDOWN = "teardown"             # says what release does where the profile's tiers cannot
    RENDER = "render"                 # writes what launch would submit (script, manifests)
    OFFERS = "offers"                 # lists what it would rent now
    CLOUD_STATUS = "cloud_status"     # asks its control plane about a rented box


# Why a platform lacks an ability, where it does not say better itself (`Platform.lacks`):
# clauses that finish "<profile> has no <ability>: …", and some of rgt's refusals quote them.
ABSENT: dict[Ability, str] = {
    Ability.DEPENDENCY_ON: "its runs start on one machine, with no scheduler to chain them or "
                           "to run a sweep as one array",
    Ability.GATE: "nothing outside its box says when the box cannot run a job: rgt asks the "
                  "box itself",
    Ability.CANCEL: "rgt's on-box runner holds its runs, and rgt stops them there itself",
    Ability.CANCEL_GRACE: "no scheduler sets a grace of its own: a cancel gives --grace or the "
                          "profile's",
    Ability.TEARDOWN: "the profile's storage tiers say all that release does to its boxes",
    Ability.RENDER: "its boxes run the job under rgt's on-box runner, as the spec says",
    Ability.OFFERS: "rgt does not rent its machines through an API",
    Ability.CLOUD_STATUS: "rgt does not rent its machines through an API",
}


@dataclass(frozen=True)
class Abilities:
    """The optional verbs one platform has, and for each it lacks, why."""

    has: frozenset[Ability]
    lacking: dict[Ability, str] = field(default_factory=dict)  # ability → the reason

    def __contains__(self, ability: object) -> bool:
        return ability in self.has

    def why_not(self, ability: Ability) -> str:
        """Why the platform lacks `ability` (a clause); "" when it has it."""
        return self.lacking.get(ability, "")


class Platform(ABC):
    """A platform: the six verbs plus audit extras (see the module docstring)."""

    name: str = ""
    supports: frozenset[str] = frozenset()
    # what relaunches unfinished runs when a paused machine starts again, or "" where nothing
    # does: `rgt watch` waits for it ("resuming") only where there is one
    restart_hook: str = ""
    # the platform's own spec sections it reads (`slurm:`, `kubernetes:`); any other platform's
    # section in a spec is refused by name rather than silently dropped
    spec_sections: frozenset[str] = frozenset()
    # whether rgt can run commands on the box itself (SSH, a pod's door); False for a notebook
    # the user runs in a browser (Colab, Kaggle): `rgt audit` then measures nothing on it
    has_shell: bool = True
    # whether rgt's runner runs in the box's own shell, so `probe.py --census` there names
    # every live run, recorded or not (rgt.lifecycle.census)
    census: bool = False
    # whether the platform maps a spec's `resources` to each job itself (a scheduler's
    # request); otherwise the box is one machine and `rgt run` measures it (lifecycle.fit)
    per_job_resources: bool = False
    # whether `rgt up` without --ssh/--host rents a machine through the platform's API (it
    # bills from the create on: the agent asks a human first)
    rents: bool = False
    # the platform's own reason for an ability it lacks, where ABSENT's words would be wrong
    lacks: ClassVar[dict[Ability, str]] = {}

    def __init__(self, profile: str | None = None) -> None:
        self.profile = profile or self.name

    @abstractmethod
    def connect(self, box: Box) -> Transport: ...

    @abstractmethod
    def provision(self, store: Store, request: Request) -> Box: ...

    @abstractmethod
    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched: ...

    @abstractmethod
    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]: ...

    @abstractmethod
    def logs(self, transport: Transport, box: Box, run: Run, *, lines: int | None = None,
             cell: int | None = None, since_byte: int | None = None) -> str: ...

    def fetch(self, transport: Transport, box: Box, run: Run, remote: str, local: Path, *,
              exclude: Sequence[str] = (), progress: Any = None) -> TransferStats:
        """Copy REMOTE to LOCAL through the box's transport (resumable, atomic per file),
        leaving out EXCLUDE; `rgt pull` verifies what came. A platform overrides it only to
        check something first (Colab: the Drive sync holds what the notebook hashed)."""
        return transport.get(remote, local, exclude=exclude, progress=progress)

    @abstractmethod
    def release(self, store: Store, box: Box) -> Released: ...

    @abstractmethod
    def audit_extras(self, transport: Transport, box: Box) -> dict[str, Any]: ...

    def stops_meter(self, box: Box) -> bool:
        """Whether `release` stops this box's meter itself (an API call, a scheduler), or the
        user must, in the console (`rgt down` then asks them to confirm they did)."""
        return False

    def abilities(self) -> Abilities:
        """The optional verbs this platform has: those its class overrides, so what it
        declares is what it does."""
        cls = type(self)
        has = frozenset(a for a in Ability
                        if getattr(cls, a.value) is not getattr(Platform, a.value))
        return Abilities(has, {a: self.lacks.get(a, ABSENT[a]) for a in Ability if a not in has})

    def _lacking(self, ability: Ability) -> UserError:
        return UserError(f"{self.profile} has no {ability.value.replace('_', ' ')}: "
                         f"{self.abilities().why_not(ability)}")

    # the optional verbs: a platform that has one overrides it (the lifecycle asks
    # `abilities()` first, so these refusals are a safety net, never the usual answer)

    def dependency_on(self, earlier: Run) -> str:
        raise self._lacking(Ability.DEPENDENCY_ON)

    def gate(self, store: Store, box: Box, run: Run) -> dict[str, Any] | None:
        raise self._lacking(Ability.GATE)

    def cancel(self, transport: Transport, box: Box, run: Run, grace_s: float
               ) -> dict[str, Any] | None:
        raise self._lacking(Ability.CANCEL)

    def cancel_grace(self, box: Box, run: Run) -> float | None:
        raise self._lacking(Ability.CANCEL_GRACE)

    def teardown(self, store: Store, box: Box) -> Teardown:
        raise self._lacking(Ability.TEARDOWN)

    def render(self, box: Box, spec: JobSpec, run_id: str, *,
               dependency: str | None = None) -> str:
        raise self._lacking(Ability.RENDER)

    def offers(self, query: OfferQuery) -> Offers:
        raise self._lacking(Ability.OFFERS)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        raise self._lacking(Ability.CLOUD_STATUS)


class Unbuilt(Platform):
    """A profile whose platform module has not landed yet: every verb says so, nothing runs.

    Replaced in `rgt.platforms.REGISTRY` by the real class when its module lands."""

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise UserError(f"the {self.profile} platform is not built yet: rgt cannot "
                        f"provision, launch, watch or release {self.profile} boxes in this "
                        "version")

    connect = provision = launch = state = logs = fetch = release = audit_extras = _refuse  # type: ignore[assignment]
