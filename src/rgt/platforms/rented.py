"""`RentedPlatform`: the skeleton every cloud that rents an SSH box through an API shares, and
the guide to adding one.

Lambda, vast.ai and RunPod differ in what they call things and in a handful of API calls; the
order of what rgt does around those calls is the same for all three, and lives here once:

1. **Refuse before renting** (`refuse_before_renting`, `refuse_taken_name`): a resource field,
   an `rgt up` option, `--rate` or `--ssh-config` the cloud cannot honour, and a box name
   already up, are refused by name before any request that could bill.
2. **Create once** (`create_once`): the cloud's create call is never retried after its answer
   may have been lost (`rgt.platforms.http.AmbiguousCreate`): rgt lists what carries the name it
   gave the create and adopts the one new instance (`adopt`), or names every extra (each bills).
3. **Record the create first** (`record_create`): the `cloud-launch` event is written the moment
   an instance id is known, before anything else can fail: it bills from there.
4. **Wait until it answers** (`wait_ready`): poll the instance, say each new state once, stop on
   a state that will never boot, and say it IS BILLING when the wait runs out.
5. **Register the SSH box** (`register_instance`): `register_rented` (retries SSH, says how to
   register by hand or stop it if SSH never works), then the instance id and the cloud's facts in
   `box.extra`.
6. **Release** (`release`): destroy → poll until the cloud says gone → what still bills, with
   one event vocabulary (`RELEASE_ASKED`, `RELEASED`) and one account of what keeps billing
   (`box.extra["still_billing"]`, read by `rgt ls` and `rgt down`).
7. **A group** (`rgt up NAME --nodes N`, rgt.platforms.rentgroup): N instances named NAME-0..,
   each recorded as it is created, booted in parallel, registered as one box of N nodes
   (rgt.remote.group); a partial group released (or kept, `--keep-partial`) in one line;
   `release` destroys every node's instance. A cloud adds the hooks `group_plan`,
   `create_node`, `node_target`, `node_address`, `node_rate`, `node_region`.

One size parser serves `--disk` and friends (`rgt.platforms.base.size_gb`, over
`rgt.spec.size_gib`): the same words mean the same GB on every cloud and platform, 1024-based
as Slurm reads them (1T = 1,024 GB, 1.5Gi = 1.5G), a bare number GB.

Adding a rental (say Paperspace) is these files, one REGISTRY line, and no lifecycle or CLI
code; nothing above is written again:

- `src/rgt/platforms/<cloud>/api.py`: its API client (`rgt.platforms.http.ApiClient` with the
  key's environment variable, the base-URL override tests use, the documented `RatePolicy`),
  and what its answers mean (a status → rgt state and whether it bills, as a table).
- `src/rgt/platforms/<cloud>/platform.py`: a `RentedPlatform` subclass with the words below and
  the hooks: `client` (the API client), `find` (the instance by id, None once the cloud says it
  is gone), `named` (live instances carrying a name, for a lost create's answer), `destroy`,
  `released`/`status_of`, `booted`/`booting_line`/`still_booting` (the wait), `rent` (map the
  request, call `create_once`, `record_create`, `wait_ready`, `register_instance`), and the
  optional verbs it has: `offers`, `cloud_status`, `still_billing`, `gate` (`gate_from`
  words the paused/vanished summary), `teardown`. `rent_options` names the `rgt up` options
  `rent` reads; any other is refused by name.
- `src/rgt/platforms/<cloud>/flags.py`, when it has flags of its own (rgt.platforms.options):
  `UP` / `OFFERS`, the same keys as `rent_options` and what `offers` reads.
- `src/rgt/profiles/data/<cloud>.yaml`: the facts (tiers, meter-stop verb, gotchas); one line in
  `rgt.platforms.REGISTRY`.
- `tests/cloud/fakes/fake_<cloud>_api.py`: a local fake that speaks the documented shapes and
  refuses what the real API refuses, and tests driving the platform against it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from rgt.errors import UserError
from rgt.platforms import rentgroup
from rgt.platforms.base import (
    Released,
    Request,
    refuse_options,
    refuse_unsupported,
)
from rgt.platforms.http import AmbiguousCreate, ApiClient, adopt_lost_create, poll_interval
from rgt.platforms.ssh import SshPlatform
from rgt.profiles import load_profile
from rgt.remote import group
from rgt.remote.register import register_rented
from rgt.remote.summary import summarize
from rgt.store import TERMINAL, Box, Store
from rgt.transport import SshTarget

Notify = Callable[[str], None]


def quiet(_: str) -> None:
    """An `on_wait` that says nothing."""


def secret_env(names: list[str] | tuple[str, ...], thing: str) -> dict[str, str]:
    """NAME → value for the named secrets, from this machine's environment: they reach the
    instance as env at create (VAST11), never in argv, the image or a start-up script."""
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise UserError(f"secrets not set in this shell: {', '.join(missing)}; export them "
                        f"(they go to the {thing} as env at create, never in argv, the image "
                        "or onstart)")
    return {n: os.environ[n] for n in names}


# One event vocabulary for a release, whatever the cloud calls its verb (vast.ai's destroy wrote
# `cloud-destroy` / `cloud-destroyed` and `destroyed_at` before; nothing in rgt reads those).
RELEASE_ASKED = "cloud-terminate"     # the meter-stop call was accepted
RELEASED = "cloud-terminated"         # the cloud confirmed the instance gone


# the base -------------------------------------------------------------------------------------

class RentedPlatform(SshPlatform):
    """An SSH box rented through a cloud's API; see the module docstring for the hooks."""

    rents = True
    confirm_s: float = 300           # how long `release` polls for the cloud to say gone
    # words, as the cloud says them
    service = ""                     # "Lambda", "vast.ai", "RunPod"
    thing = "instance"               # "instance", "pod"
    kill = "terminate"               # the meter-stop verb: "terminate", "destroy"
    create_word = "create"           # "launch" (Lambda), "create"
    name_word = "named"              # how an instance carries rgt's name: "named", "labelled"
    console = "the console"          # where the user looks and acts by hand
    kill_by_hand = "in the console"  # how to stop the meter of a box rgt did not rent
    kill_trap = ""                   # the wrong way out, said beside it ("a stop keeps billing")
    release_gotcha = ""              # appended to "may still bill" (" (RP14)")
    fixed_login = ""                 # who and where SSH logs in, when the API decides: no --user
    rent_options: frozenset[str] = frozenset()  # the `rgt up` options `rent` reads

    # hooks a cloud writes -------------------------------------------------------------------

    def client(self) -> ApiClient:
        raise NotImplementedError

    def find(self, api: ApiClient, instance_id: str) -> dict[str, Any] | None:
        """The instance as the API shows it now; None only when the API says it is gone."""
        raise NotImplementedError

    def named(self, api: ApiClient, name: str) -> list[dict[str, Any]]:
        """Live instances carrying `name` (given to the create): a lost answer's candidates."""
        raise NotImplementedError

    def destroy(self, api: ApiClient, instance_id: str) -> None:
        """The meter-stop call; an instance already gone is no error."""
        raise NotImplementedError

    def status_of(self, inst: dict[str, Any]) -> str:
        """The instance's status in the API's own word, for messages."""
        return str(inst.get("status") or "unknown")

    def released(self, inst: dict[str, Any], instance_id: str) -> bool:
        """Whether a listed instance no longer bills after `destroy` (terminated); raise where
        its state says the release went wrong (Lambda: unhealthy)."""
        return False

    def still_billing(self, api: ApiClient, box: Box) -> list[str] | None:
        """What keeps billing once the instance is gone (a filesystem, a network volume); None
        where the profile's tiers say it all."""
        return None

    def released_line(self, instance_id: str, polls: int) -> str:
        return f"{self.kill}ed {self.service} {self.thing} {instance_id} (confirmed gone)"

    def booted(self, inst: dict[str, Any] | None, instance_id: str) -> bool:
        """True once the instance runs and publishes SSH; raise on a state it will never boot
        from (gone, offline, error)."""
        raise NotImplementedError

    def booting_line(self, inst: dict[str, Any], instance_id: str) -> str:
        return f"{self.thing} {instance_id}: {self.status_of(inst)}"

    def still_booting(self, inst: dict[str, Any], instance_id: str, wait_s: float) -> str:
        return (f"{self.service} {self.thing} {instance_id} is still {self.status_of(inst)} "
                f"after {wait_s:.0f} s and IS BILLING: check {self.console}, and {self.kill} "
                "it there if it never comes up")

    # a group (`--nodes N`): rgt.platforms.rentgroup drives these -----------------------------

    def group_plan(self, api: ApiClient, store: Store, request: Request) -> rentgroup.Plan:
        """Everything a group's creates need, checked and looked up once before the first
        (the refusals `rent` makes for one instance)."""
        raise UserError(f"rgt cannot rent a group of {self.service} {self.thing}s (--nodes)")

    def create_node(self, api: ApiClient, plan: rentgroup.Plan, rank: int, name: str,
                    region: str | None, first: rentgroup.Created | None, before: set[Any],
                    on_wait: Notify) -> rentgroup.Created:
        """One create (`create_once`, `before`: the ids already carrying `name`) carrying
        `name`, in `region` (the group's, once the head has one) and like `first` (the head)
        where given. Not recorded: the caller does."""
        raise NotImplementedError

    def node_target(self, row: dict[str, Any], plan: rentgroup.Plan) -> SshTarget:
        """Where a booted instance answers SSH."""
        raise NotImplementedError

    def node_address(self, row: dict[str, Any]) -> str:
        """Where the other nodes reach it: its private address where the API gives one."""
        raise NotImplementedError

    def node_rate(self, row: dict[str, Any]) -> float:
        """USD per hour of a listed instance (an adopted one: its create's answer is lost)."""
        return 0.0

    def node_region(self, row: dict[str, Any]) -> str | None:
        return None

    # the skeleton -----------------------------------------------------------------------------

    def provision(self, store: Store, request: Request) -> Box:
        if request.target is None and request.resources.nodes > 1:
            return rentgroup.rent_group(self, store, request)
        return super().provision(store, request)

    def refuse_before_renting(self, request: Request) -> None:
        """What `rent` cannot honour, refused by name before any request that could bill."""
        refuse_unsupported(self.name, self.supports, request.resources)
        refuse_options(self.name, set(self.rent_options | set(self.CONNECTION)), request.options)
        if self.fixed_login and ("user" in request.options or "port" in request.options):
            raise UserError(f"{self.fixed_login}: drop --user/--port")
        if request.options.get("keep_partial") and request.resources.nodes < 2:
            raise UserError("--keep-partial is for a group (--nodes N): it keeps the instances "
                            "of a group that could not be formed")
        if request.rate is not None:
            raise UserError("--rate is for a box you rented by hand: when rgt rents, the price "
                            "comes from the API")
        if request.options.get("ssh_config"):
            raise UserError("--ssh-config goes with --host; a rented instance's address comes "
                            "from the API")

    @staticmethod
    def refuse_taken_name(store: Store, name: str) -> None:
        existing = store.find_box(name)
        if existing and existing.state == "up":
            raise UserError(f"a box named {name!r} is already up; pick another name")

    def present(self, api: ApiClient, name: str) -> set[Any]:
        """The ids already carrying `name`: never adopted as ours after a lost answer."""
        return {i.get("id") for i in self.named(api, name)}

    def create_once(self, api: ApiClient, name: str, before: set[Any],
                    create: Callable[[], Any], *, poll_s: float) -> tuple[Any, bool]:
        """`create()` once; after a lost answer the instance it made, found by its name
        (`adopt`), never a second create. Returns (what `create` returned or the adopted
        instance's row, adopted?)."""
        try:
            return create(), False
        except AmbiguousCreate as err:
            return self.adopt(api, name, before, err, poll_s=poll_s), True

    def adopt(self, api: ApiClient, name: str, before: set[Any], err: Exception, *,
              poll_s: float, looks: int = 5) -> dict[str, Any]:
        """The one new instance carrying `name`; every extra is named (each bills)."""
        fresh = adopt_lost_create(lambda: self.named(api, name), before, poll_s=poll_s,
                                  looks=looks)
        if len(fresh) == 1:
            return fresh[0]
        what = f"{self.name_word} {name!r}"
        if fresh:
            ids = ", ".join(str(i.get("id")) for i in fresh)
            raise UserError(f"the {self.create_word} answer was lost ({err}) and {self.service} "
                            f"now lists {len(fresh)} new {self.thing}s {what} ({ids}), ALL "
                            f"BILLING: {self.kill} the extras in {self.console}")
        raise UserError(f"the {self.create_word} answer was lost ({err}) and no new "
                        f"{self.thing} {what} is listed after {looks} looks; rgt did not "
                        f"{self.create_word} again. Check {self.console} before retrying: one "
                        "may still appear and bill")

    def record_create(self, store: Store, name: str, instance_id: Any, adopted: bool,
                      **detail: Any) -> None:
        """In the store before anything else can fail: the instance bills from here."""
        store.record("cloud-launch", {"platform": self.name, "instance_id": instance_id,
                                      **detail, "adopted": adopted}, box=name)

    def wait_ready(self, api: ApiClient, instance_id: str, *, wait_s: float, poll_s: float,
                   on_wait: Notify) -> dict[str, Any]:
        """Poll until `booted`, saying each new state once; past `wait_s`, say it bills."""
        deadline = time.monotonic() + wait_s
        last = None
        while True:
            inst = self.find(api, instance_id)
            if self.booted(inst, instance_id):
                return inst  # type: ignore[return-value]  (booted(None) raises)
            assert inst is not None
            if time.monotonic() > deadline:
                raise UserError(self.still_booting(inst, instance_id, wait_s))
            line = self.booting_line(inst, instance_id)
            if line != last:
                on_wait(line)
                last = line
            time.sleep(poll_s)

    def register_instance(self, store: Store, name: str, instance_id: Any, *, host: str,
                          port: int | None, user: str, identity: str | None, rate: float,
                          data_dir: str | None, durable_dir: str | None, on_wait: Notify,
                          extra: dict[str, Any]) -> Box:
        """Register the rented instance as box `name` once SSH answers at the address the API
        gave, its id and the cloud's facts in `box.extra`; if SSH never works, say it bills and
        how to recover."""
        target = rentgroup.ssh_target(host, port, user, identity)
        box = register_rented(store, name, load_profile(self.profile), target,
                              instance=f"{self.service} {self.thing} {instance_id}",
                              stop_hint=f"{self.kill} it in {self.console}", rate=rate,
                              data_dir=data_dir, durable_dir=durable_dir, on_retry=on_wait,
                              pause_s=min(3.0, poll_interval()))
        store.update_box(name, extra={**box.extra, "platform": self.name,
                                      "instance_id": instance_id, **extra})
        return store.box(name)

    def instance_id(self, box: Box) -> str:
        """The API's id for the box's instance; a box registered by hand has none."""
        instance_id = box.extra.get("instance_id")
        if not instance_id:
            raise UserError(f"box {box.name!r} has no {self.service} {self.thing} id (registered "
                            f"by hand with `rgt up --ssh`, not rented by rgt): {self.kill} it "
                            "in the console")
        return str(instance_id)

    def stops_meter(self, box: Box) -> bool:
        # a box registered by hand (`rgt up --ssh`) has no instance id for the API to act on
        return bool(box.extra.get("instance_id"))

    def release(self, store: Store, box: Box) -> Released:
        """The meter stop: `destroy`, then poll until the cloud says the instance is gone (an
        accepted call is not a stopped meter), then what still bills. Only `rgt down` calls
        it, after the Iron Law."""
        if not box.extra.get("instance_id"):  # registered by hand with `rgt up`: no API id
            trap = f" — {self.kill_trap}" if self.kill_trap else ""
            return Released(
                f"rgt has no {self.service} {self.thing} id for this box (it was registered by "
                f"hand with `rgt up --ssh`, not rented by rgt): {self.kill} it yourself "
                f"{self.kill_by_hand}{trap}; it bills until then",
                still_billing=[f"{self.service} {self.thing} {box.name} until you {self.kill} "
                               "it"])
        members = group.nodes(box)
        if members:  # a group rgt rented: every node's instance (rgt.platforms.rentgroup)
            return rentgroup.release_group(self, store, box, members)
        instance_id = self.instance_id(box)
        poll_s = poll_interval()
        with self.client() as api:
            self.destroy(api, instance_id)
            store.record(RELEASE_ASKED, {"instance_id": instance_id, "verb": self.kill},
                         box=box.name)
            deadline = time.monotonic() + self.confirm_s
            polls = 0
            while (inst := self.find(api, instance_id)) is not None \
                    and not self.released(inst, instance_id):
                polls += 1
                if time.monotonic() > deadline:
                    raise UserError(f"{self.kill} was accepted but {self.service} still shows "
                                    f"{self.thing} {instance_id} ({self.status_of(inst)}) after "
                                    f"{self.confirm_s:.0f} s; it may still bill — check "
                                    f"{self.console}{self.release_gotcha}")
                time.sleep(poll_s)
            billing = self.still_billing(api, box)
        extra = {**store.box(box.name).extra, "terminated_at": time.time()}
        if billing is not None:
            extra["still_billing"] = billing
        store.update_box(box.name, extra=extra)
        store.record(RELEASED, {"instance_id": instance_id, "verb": self.kill, "polls": polls,
                                "still_billing": billing or []}, box=box.name)
        return Released(self.released_line(instance_id, polls), still_billing=billing or [])

    # watch ------------------------------------------------------------------------------------

    def gate_on(self, store: Store, box: Box, run: Any,
                runs: tuple[str, ...] = ("running",)) -> dict[str, Any] | None:
        """A `gate` (asked by `rgt watch` before any SSH probe) from `cloud_status`: None
        (probe as usual) for a box registered by hand, a control plane that cannot be asked
        (SSH may still answer), or an instance whose `state` is in `runs`; else `gate_from`."""
        if not box.extra.get("instance_id"):
            return None  # registered by hand: no instance to ask about
        try:
            status = self.cloud_status(store, box)  # type: ignore[attr-defined]
        except UserError:
            return None  # the API is unreachable or the key unset: SSH may still answer
        return None if status["state"] in runs else self.gate_from(status, run)

    def gate_from(self, status: dict[str, Any], run: Any) -> dict[str, Any]:
        """`rgt watch`'s summary while the instance cannot run the job (`status` from
        `cloud_status`): "paused" with the instance's state as its cause, "vanished" once it is
        gone (its disk went with it); a run that ended before keeps its end."""
        gotcha = f" ({status['gotcha']})" if status.get("gotcha") else ""
        msg = f": {status['status_msg']}" if status.get("status_msg") else ""
        cause = (f"{self.service} {self.thing} {status['instance_id']} is {status['state']}"
                 f"{gotcha}{msg}")
        if run.status in TERMINAL:
            run_status = run.status  # it ended before the instance stopped; that stays true
        elif status["state"] == "gone":
            run_status = "vanished"
        else:
            run_status = "paused"
        return {**summarize({}), "status": run_status, "exit_code": run.exit_code,
                "causes": [cause], "advice": status["advice"]}
