"""Lambda Cloud (On-Demand Cloud) through its REST API.

Docs: https://docs.lambda.ai/api/cloud (API base https://cloud.lambdalabs.com/api/v1; basic auth
with the key as the user name, or Bearer), https://docs.lambda.ai/public-cloud/filesystems,
https://docs.lambda.ai/public-cloud/billing.

The platform's shape, and what this module does about it:

- Capacity, not eviction, is the bottleneck (LAM5): `lambda_up` polls `GET /instance-types` for
  `regions_with_capacity_available` and launches the moment a region appears, within a bounded
  wait.
- A filesystem attaches at launch only and must live in the instance's region (LAM2): we look the
  filesystem up first and refuse a region mismatch before anything is launched (or billed).
- No static IP (LAM10): the IP is read from `GET /instances/{id}` on every launch.
- The meter stops only through `POST /instance-operations/terminate` (LAM3: an in-box shutdown
  leaves the instance in Alert, still billing), and we confirm the instance really reaches
  `terminated`.
- The filesystem outlives the instance and bills $0.20/GiB/month until deleted (LAM6): teardown
  records that in `box.extra["still_billing"]`, so `rgt ls` keeps showing it.

- Rate limits (docs: "Are API requests rate-limited?", LambdaLabs/docsy-lambda-docs
  content/en/cloud/rate-limiting.md): about one request per second, and one request to
  `/instance-operations/launch` per 10 seconds; a 429 otherwise. `POLICY` paces every call of
  one client to that, so a capacity race (capacity listed, launch refused) costs one launch per
  10 s within `--wait`, never a tight loop.
- A launch is never retried blindly (http.AmbiguousCreate): after a lost answer we list
  `GET /instances` for the name we gave the launch and adopt the new instance, recorded in the
  store before anything else can fail.

Instance status (the API's `status` enum) → what rgt says → billing?

    booting      booting       yes once it passes health checks (treated as billing)
    active       active        yes, by the minute
    unhealthy    unhealthy     YES (Alert: an in-box shutdown leaves it billing, LAM3)
    terminating  terminating   until terminated (treated as billing)
    terminated   terminated    no
    preempted    preempted     no compute (Lambda reclaimed it; not running); `rgt down`
                               terminates the record, a filesystem still bills (LAM6)
    (404)        gone          no
    other        unknown       treated as billing: check the console

The key is `LAMBDA_API_KEY`, read from the environment by name (never argv, never printed).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import (
    OfferQuery,
    Offers,
    Released,
    Request,
    gpu_choices,
    refuse_offer_filters,
    refuse_options,
    refuse_unsupported,
)
from rgt.platforms.http import (
    AmbiguousCreate,
    ApiClient,
    ApiError,
    RatePolicy,
    adopt_lost_create,
    poll_interval,
)
from rgt.platforms.ssh import SshPlatform
from rgt.profiles import load_profile
from rgt.remote.register import register_rented
from rgt.store import Box, Store
from rgt.transport import SshTarget

API_URL = "https://cloud.lambdalabs.com/api/v1"  # docs.lambda.ai/api/cloud
KEY_ENV = "LAMBDA_API_KEY"
URL_ENV = "RGT_LAMBDA_API_URL"
FS_USD_PER_GIB_MONTH = 0.20  # docs.lambda.ai/public-cloud/filesystems (LAM6)
CONSOLE = "https://cloud.lambda.ai"
LAUNCH = "/instance-operations/launch"
# docs.lambda.ai "Are API requests rate-limited?": 1 request/s in general, 1 launch per 10 s.
POLICY = RatePolicy(min_interval_s=1.0, path_intervals=((LAUNCH, 10.0),))
BILLING = {"booting": True, "active": True, "unhealthy": True, "terminating": True,
           "terminated": False, "preempted": False}

Notify = Callable[[str], None]


def client() -> ApiClient:
    return ApiClient(service="Lambda Cloud", key_env=KEY_ENV, url_env=URL_ENV,
                     default_url=API_URL, auth="basic", policy=POLICY)


def _quiet(_: str) -> None:
    pass


# instance types and capacity ---------------------------------------------------------------

@dataclass
class InstanceType:
    name: str
    description: str
    usd_per_hour: float
    regions: list[str]  # regions with capacity available right now

    @classmethod
    def from_api(cls, entry: dict[str, Any]) -> InstanceType:
        it = entry.get("instance_type", {})
        return cls(name=it.get("name", ""), description=it.get("description", ""),
                   usd_per_hour=(it.get("price_cents_per_hour") or 0) / 100,
                   regions=[r["name"] for r in entry.get("regions_with_capacity_available", [])])


def parse_gpu(gpu: str) -> tuple[str, int]:
    """'H100:1' → ('h100', 1); 'A100' → ('a100', 1)."""
    name, _, count = gpu.partition(":")
    if not name or (count and not count.isdigit()):
        raise UserError(f"--gpu {gpu!r}: write it as TYPE:COUNT, e.g. H100:1 or A100:8, or give a "
                        "Lambda instance type name such as gpu_1x_h100_pcie")
    return name.strip().lower(), int(count or 1)


def matching_types(types: list[InstanceType], gpu: str) -> list[InstanceType]:
    """The instance types that fit `gpu` ('H100:1' or an exact type name), cheapest first."""
    exact = [t for t in types if t.name == gpu]
    if exact:
        return exact
    name, count = parse_gpu(gpu)
    pattern = re.compile(rf"^gpu_{count}x_{re.escape(name)}(_|$)")
    return sorted((t for t in types if pattern.match(t.name)), key=lambda t: t.usd_per_hour)


def instance_types(api: ApiClient) -> list[InstanceType]:
    data = api.get("/instance-types").get("data", {})
    return [InstanceType.from_api(entry) for entry in data.values()]


def capacity(gpu: str | None = None) -> list[InstanceType]:
    """Every instance type (or those matching `gpu`) with where it can launch right now."""
    with client() as api:
        types = instance_types(api)
    return matching_types(types, gpu) if gpu else sorted(types, key=lambda t: t.usd_per_hour)


def lambda_offers(query: OfferQuery) -> Offers:
    """Instance types as `rgt offers` shows them: cheapest first, with where each can launch."""
    refuse_offer_filters("lambda", set(), query.options)
    if query.spot:
        raise UserError("Lambda rents on-demand instances only: it has no spot or "
                        "interruptible capacity; drop --interruptible")
    model, count = query.model_and_count()
    gpu = query.gpu  # an instance type's name (gpu_8x_h100_sxm5) says its count itself
    if model and count and not model.startswith("gpu_"):
        gpu = f"{model}:{count}"
    types = capacity(gpu)
    if query.max_price is not None:
        types = [t for t in types if t.usd_per_hour <= query.max_price]
    if query.region:
        types = [t for t in types if query.region in t.regions]
    shown = types[:query.limit]
    where = f" in {query.region}" if query.region else ""
    return Offers(
        title=f"Lambda instance types{' for ' + gpu if gpu else ''}{where} (capacity now)",
        columns=["type", "gpus", "$/h", "regions with capacity"],
        rows=[[t.name, t.description, f"{t.usd_per_hour:.2f}",
               ", ".join(t.regions) or "none right now"] for t in shown],
        records=[{"id": t.name, "description": t.description, "usd_per_hour": t.usd_per_hour,
                  "regions": t.regions} for t in shown],
        empty=(f"no Lambda instance type{' for ' + gpu if gpu else ''}"
               + (f" under ${query.max_price:g}/h" if query.max_price is not None else "")
               + (f" has capacity in {query.region}" if query.region else "")
               + "; try another --gpu (H100:1, A100:8) or drop the filters"),
        next="Capacity comes and goes (LAM5): rgt up NAME --profile lambda --gpu TYPE:COUNT "
             "[--region R] waits for it (--wait)")


# filesystems --------------------------------------------------------------------------------

def find_filesystem(api: ApiClient, name: str) -> dict[str, Any]:
    filesystems = api.get("/file-systems").get("data", [])
    for fs in filesystems:
        if fs.get("name") == name or fs.get("id") == name:
            return fs
    known = ", ".join(f"{fs.get('name')} ({_region(fs)})" for fs in filesystems) or "none"
    raise UserError(f"no Lambda filesystem named {name!r} (yours: {known}); create it in the "
                    f"console (Storage) in the region you will launch in — it cannot be attached "
                    f"after launch (LAM2)")


def _region(fs: dict[str, Any]) -> str:
    region = fs.get("region")
    return region.get("name", "") if isinstance(region, dict) else str(region or "")


def filesystem_billing_line(fs: dict[str, Any]) -> str:
    gib = (fs.get("bytes_used") or 0) / 2**30
    return (f"Lambda filesystem {fs.get('name')} in {_region(fs)} ({gib:.1f} GiB used): "
            f"${FS_USD_PER_GIB_MONTH:.2f}/GiB/month ≈ ${gib * FS_USD_PER_GIB_MONTH:.2f}/month "
            f"until you delete it (console → Storage → Delete) (LAM6)")


# launch ----------------------------------------------------------------------------------

def _ssh_key_name(api: ApiClient, ssh_key: str | None) -> str:
    """The key Lambda installs: the one named, checked now rather than at launch (after the wait
    for capacity), or the account's only one."""
    names = [k.get("name", "?") for k in api.get("/ssh-keys").get("data", [])]
    if ssh_key in names or (ssh_key is None and len(names) == 1):
        return ssh_key or names[0]
    yours = ", ".join(names) or "none yet"
    if ssh_key:
        raise UserError(f"Lambda has no SSH key named {ssh_key!r} (yours: {yours}); add it in "
                        "the console (SSH keys) or pick one of yours with --ssh-key")
    raise UserError(f"pick the SSH key Lambda should install with --ssh-key NAME (yours: {yours});"
                    " add one in the console (SSH keys) if you have none")


def wait_for_capacity(api: ApiClient, gpu: str | Sequence[str], region: str | None, *,
                      wait_s: float, poll_s: float, on_wait: Notify,
                      deadline: float | None = None) -> tuple[InstanceType, str]:
    """Poll GET /instance-types until a type that fits one of the GPUs asked for has capacity
    (in `region`, if given). Several GPUs (`--gpu H100:1,A100:1`, a task's accelerator list)
    are tried in order on every poll: the first with capacity wins, and each one skipped is
    said with why.

    `deadline` (monotonic) is the whole `--wait`, shared with the launches that lost a race."""
    gpus = [gpu] if isinstance(gpu, str) else list(gpu)
    asked = ", ".join(gpus)
    deadline = time.monotonic() + wait_s if deadline is None else deadline
    where = f"in {region}" if region else "in any region"
    polls = 0
    said: list[str] = []
    while True:
        polls += 1
        types = instance_types(api)
        skipped: list[str] = []
        unknown = []
        for choice in gpus:
            candidates = matching_types(types, choice)
            if not candidates:
                unknown.append(choice)
                skipped.append(f"{choice}: Lambda has no instance type for it")
                continue
            for itype in candidates:  # cheapest first
                regions = itype.regions if region is None else [r for r in itype.regions
                                                                if r == region]
                if regions:
                    if skipped:
                        on_wait(f"skipped {'; '.join(skipped)}; taking {choice}: "
                                f"{itype.name} in {regions[0]}")
                    return itype, regions[0]
            skipped.append(f"{choice}: no capacity {where}")
        if len(unknown) == len(gpus):
            known = ", ".join(sorted(t.name for t in types)) or "none"
            raise UserError(f"Lambda has no instance type for --gpu {asked} (types: {known})")
        left = deadline - time.monotonic()
        if left <= 0:
            raise UserError(
                f"no Lambda capacity for {asked} {where} after waiting {wait_s:.0f} s "
                f"({polls} polls of GET /instance-types); nothing was launched or billed. "
                f"Wait longer (--wait), try another GPU type"
                + ("" if region is None else " or region (a filesystem pins the region)")
                + " (LAM5)")
        if len(gpus) > 1 and skipped != said:  # say each choice's fate once, not every poll
            on_wait("tried in order: " + "; ".join(skipped))
            said = skipped
        on_wait(f"no capacity for {asked} {where} yet (poll {polls}); checking again in "
                f"{min(poll_s, left):.0f} s, giving up in {left:.0f} s (LAM5)")
        time.sleep(min(poll_s, max(left, 0.01)))


def wait_for_active(api: ApiClient, instance_id: str, *, wait_s: float, poll_s: float,
                    on_wait: Notify) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    last = ""
    while True:
        inst = api.get(f"/instances/{instance_id}").get("data", {})
        status = inst.get("status", "")
        if status == "active" and inst.get("ip"):
            return inst
        if status in ("terminated", "terminating", "unhealthy", "preempted"):
            raise UserError(f"Lambda instance {instance_id} went {status} while booting; "
                            + ("it may still be billing: terminate it in the console"
                               if status == "unhealthy" else "nothing more is billing"))
        if time.monotonic() > deadline:
            raise UserError(f"Lambda instance {instance_id} is still {status or 'unknown'} after "
                            f"{wait_s:.0f} s and IS BILLING: check {CONSOLE}, or terminate it "
                            f"there if it never comes up")
        if status != last:
            on_wait(f"instance {instance_id}: {status or 'pending'}")
            last = status
        time.sleep(poll_s)


def lambda_up(store: Store, name: str, gpu: str | Sequence[str] = "H100:1",
              region: str | None = None,
              filesystem: str | None = None, *, ssh_key: str | None = None,
              wait_s: float = 1800, poll_s: float | None = None, boot_wait_s: float = 900,
              on_wait: Notify = _quiet, identity: str | None = None, ssh_user: str = "ubuntu",
              ssh_port: int | None = None, data_dir: str | None = None,
              durable_dir: str | None = None) -> Box:
    """Launch a Lambda instance when capacity appears, wait for it, register it as box `name`.

    `gpu` may be several choices, first preferred: the first with capacity is launched, and
    only one instance ever is (a launch refused for capacity made nothing; a lost answer is
    adopted, never launched again)."""
    gpus = [gpu] if isinstance(gpu, str) else list(gpu)
    asked = ", ".join(gpus)
    existing = store.find_box(name)
    if existing and existing.state == "up":
        raise UserError(f"a box named {name!r} is already up; pick another name")
    if math.isnan(wait_s):
        raise UserError("--wait: give the seconds to wait for capacity, e.g. --wait 3600")
    poll_s = poll_interval() if poll_s is None else poll_s
    with client() as api:
        fs = None
        if filesystem:
            fs = find_filesystem(api, filesystem)
            fs_region = _region(fs)
            if region and region != fs_region:
                raise UserError(
                    f"filesystem {fs['name']} lives in {fs_region} but you asked for {region}: "
                    f"a Lambda filesystem attaches only at launch and only to an instance in its "
                    f"own region (LAM2). Use --region {fs_region}, or launch without it")
            region = fs_region
        key_name = _ssh_key_name(api, ssh_key)
        if len(name) > 64:
            raise UserError(f"box name {name!r} is {len(name)} characters; Lambda instance "
                            f"names hold at most 64: pick a shorter name")
        # Instances already carrying this name are not ours to adopt after a lost answer.
        before = {i.get("id") for i in _named(api, name)}
        deadline = time.monotonic() + wait_s  # one --wait for polls and lost races together
        races = 0
        while True:
            itype, where = wait_for_capacity(api, gpus, region, wait_s=wait_s, poll_s=poll_s,
                                             on_wait=on_wait, deadline=deadline)
            body = {"region_name": where, "instance_type_name": itype.name,
                    "ssh_key_names": [key_name],
                    "file_system_names": [fs["name"]] if fs else [],
                    "name": name}  # no `quantity`: the current spec has none (one is made)
            adopted = False
            try:
                instance_id = api.post(LAUNCH, body, idempotent=False)["data"]["instance_ids"][0]
                break
            except AmbiguousCreate as err:
                instance_id = _adopt(api, name, before, err, poll_s=poll_s)
                adopted = True
                break
            except ApiError as err:
                if "insufficient-capacity" not in err.code:
                    raise
                races += 1
                # the next launch may not leave before the documented gap: past --wait, stop
                if time.monotonic() + dict(POLICY.gaps(LAUNCH))[LAUNCH] >= deadline:
                    raise UserError(
                        f"Lambda listed capacity for {asked} but refused {races} launches as "
                        f"insufficient-capacity within --wait {wait_s:.0f} s; nothing was "
                        f"launched or billed. Wait longer (--wait) or try another GPU type "
                        f"(LAM5)") from None
                on_wait(f"{itype.name} in {where} was taken before our launch (race {races}); "
                        f"polling again (Lambda allows one launch per 10 s)")
                time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.0)))
        # In the store before anything else can fail: a launched instance bills.
        store.record("cloud-launch", {"platform": "lambda", "instance_id": instance_id,
                                      "type": itype.name, "region": where, "adopted": adopted,
                                      "asked": gpus,
                                      "filesystem": fs and fs["name"]}, box=name)
        on_wait(f"launched {itype.name} in {where} (${itype.usd_per_hour:.2f}/h, billing from "
                f"health check): instance {instance_id}")
        inst = wait_for_active(api, instance_id, wait_s=boot_wait_s, poll_s=poll_s,
                               on_wait=on_wait)
    ip = inst["ip"]  # LAM10: read every launch, never remembered
    target = SshTarget(host=ip, port=ssh_port, user=ssh_user,
                       identity=None if identity is None else Path(identity).expanduser())
    # Without a filesystem there is no durable tier on the box: results must be pulled home.
    durable = durable_dir or (f"/lambda/nfs/{fs['name']}" if fs else data_dir or "/home/ubuntu")
    box = register_rented(store, name, load_profile("lambda"), target,
                          instance=f"Lambda instance {instance_id}",
                          stop_hint=f"terminate it in the console ({CONSOLE})",
                          rate=itype.usd_per_hour, data_dir=data_dir, durable_dir=durable,
                          on_retry=on_wait, pause_s=min(3.0, poll_interval()))
    extra = {**box.extra, "platform": "lambda", "instance_id": instance_id,
             "instance_type": itype.name, "region": where, "ip": ip}
    if fs:
        extra["filesystem"] = {"name": fs["name"], "id": fs.get("id"), "region": _region(fs)}
    else:
        extra["notes"] = ["no filesystem attached: nothing on this box survives terminate; "
                          "pull results home before `rgt down` (LAM1)"]
    store.update_box(name, extra=extra)
    return store.box(name)


def _named(api: ApiClient, name: str) -> list[dict[str, Any]]:
    """Live instances (GET /instances) that carry `name`."""
    return [i for i in (api.get("/instances") or {}).get("data", [])
            if i.get("name") == name and i.get("status") != "terminated"]


def _adopt(api: ApiClient, name: str, before: set[Any], err: ApiError, *, poll_s: float,
           looks: int = 5) -> str:
    """The instance a launch with a lost answer made, found by its name; never a relaunch."""
    fresh = adopt_lost_create(lambda: _named(api, name), before, poll_s=poll_s, looks=looks)
    if len(fresh) == 1:
        return str(fresh[0]["id"])
    if fresh:
        ids = ", ".join(str(i["id"]) for i in fresh)
        raise UserError(f"the launch answer was lost ({err}) and Lambda now lists "
                        f"{len(fresh)} new instances named {name!r} ({ids}), ALL BILLING: "
                        f"terminate the extras in the console ({CONSOLE})")
    raise UserError(f"the launch answer was lost ({err}) and no new instance named {name!r} "
                    f"is listed after {looks} looks; rgt did not launch again. Check the "
                    f"console ({CONSOLE}) before retrying: one may still appear and bill")


# status and teardown -----------------------------------------------------------------------

def instance_status(box: Box) -> dict[str, Any]:
    """What Lambda says about the box's instance, with what it means for the bill."""
    instance_id = _instance_id(box)
    with client() as api:
        try:
            inst = api.get(f"/instances/{instance_id}").get("data", {})
        except ApiError as err:
            if err.status == 404:
                return {"instance_id": instance_id, "status": "gone", "billing": False,
                        "advice": "the instance no longer exists"}
            raise
    status = inst.get("status", "unknown")
    advice = {
        "booting": "starting; billing begins when it passes health checks",
        "active": "running and billing by the minute",
        "unhealthy": "Alert/unhealthy and STILL BILLING (LAM3): an in-box shutdown does not stop "
                     "the meter; terminate it (`rgt down`) after pulling results",
        "terminating": "terminating; billing stops once terminated",
        "terminated": "terminated; the instance no longer bills",
        "preempted": "preempted: Lambda reclaimed it and it no longer runs; relaunch and "
                     "resume from the checkpoint home, then `rgt down` to clear it (a "
                     "filesystem keeps billing, LAM6)",
    }.get(status, "unknown state: treated as billing; check the console")
    return {"instance_id": instance_id, "status": status, "ip": inst.get("ip"),
            "region": (inst.get("region") or {}).get("name"),
            "billing": BILLING.get(status, True), "advice": advice}


def _instance_id(box: Box) -> str:
    instance_id = box.extra.get("instance_id")
    if not instance_id:
        raise UserError(f"box {box.name!r} has no Lambda instance id (registered by hand with "
                        "`rgt up --ssh`, not rented by rgt): terminate it in the console")
    return str(instance_id)


class LambdaPlatform(SshPlatform):
    """An SSH box rented through Lambda's API: `provision` launches when capacity appears
    (`lambda_up`), `release` terminates and confirms; the rest is `SshPlatform`'s."""

    name = "lambda"
    supports = frozenset({"gpu", "region"})  # an instance type by GPU; where it launches
    rents = True
    confirm_s: float = 300

    def rent(self, store: Store, request: Request) -> Box:
        """`lambda_up` as `rgt up --profile lambda --gpu H100:1 [--region R]` asks."""
        refuse_unsupported(self.name, self.supports, request.resources)
        options = request.options
        refuse_options(self.name, {"filesystem", "ssh_key", "wait", "identity", "user",
                                   "port", "ssh_config"}, options)
        if request.rate is not None:
            raise UserError("--rate is for a box you rented by hand: when rgt rents, the price "
                            "comes from the API")
        if options.get("ssh_config"):
            raise UserError("--ssh-config goes with --host; a rented instance's address comes "
                            "from the API")
        if not request.resources.gpu:
            raise UserError(f"to rent on Lambda give --gpu TYPE:COUNT (e.g. `rgt up "
                            f"{request.name} --profile lambda --gpu H100:1`); to register an "
                            "instance you launched in the console give --ssh 'ssh ubuntu@IP'")
        wait = options.get("wait")
        return lambda_up(store, request.name, gpu_choices(request.resources),
                         request.resources.region,
                         options.get("filesystem"), ssh_key=options.get("ssh_key"),
                         wait_s=1800 if wait is None else wait, on_wait=request.on_wait,
                         identity=options.get("identity"),
                         ssh_user=options.get("user") or "ubuntu", ssh_port=options.get("port"),
                         data_dir=request.data_dir, durable_dir=request.durable_dir)

    def offers(self, query: OfferQuery) -> Offers:
        """`rgt offers --profile lambda`: the instance types (those fitting --gpu), their price
        and the regions with capacity right now (LAM5: capacity, not price, is the catch)."""
        return lambda_offers(query)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        return instance_status(box)

    def stops_meter(self, box: Box) -> bool:
        # a box registered by hand (`rgt up --ssh`) has no instance id for the API to act on
        return bool(box.extra.get("instance_id"))

    def release(self, store: Store, box: Box) -> Released:
        if not box.extra.get("instance_id"):  # registered by hand with `rgt up`: no API id
            return Released(
                "rgt has no Lambda instance id for this box (it was registered by hand "
                "with `rgt up --ssh`, not rented by rgt): terminate it yourself in the "
                "console or with POST /instance-operations/terminate — never an in-box "
                "shutdown (LAM3); it bills until then",
                still_billing=[f"Lambda instance {box.name} until you terminate it"])
        instance_id = _instance_id(box)
        poll_s = poll_interval()
        with client() as api:
            # LAM3: the meter stops only through terminate, never an in-box shutdown.
            api.post("/instance-operations/terminate", {"instance_ids": [instance_id]})
            store.record("cloud-terminate", {"instance_id": instance_id}, box=box.name)
            deadline = time.monotonic() + self.confirm_s
            while True:
                try:
                    status = api.get(f"/instances/{instance_id}").get("data", {}).get("status")
                except ApiError as err:
                    if err.status != 404:
                        raise
                    status = "terminated"  # gone from the list: nothing left to bill
                if status in ("terminated", "preempted"):
                    break
                if status == "unhealthy":
                    raise UserError(f"Lambda instance {instance_id} is unhealthy (Alert) after "
                                    f"terminate and may still be billing (LAM3): terminate it "
                                    f"in the console ({CONSOLE}) and check it disappears")
                if time.monotonic() > deadline:
                    raise UserError(f"terminate was accepted but instance {instance_id} is still "
                                    f"{status} after {self.confirm_s:.0f} s; it may still be "
                                    f"billing — check {CONSOLE}")
                time.sleep(poll_s)
            still_billing = []
            fs_info = box.extra.get("filesystem")
            if fs_info:
                try:
                    fs = find_filesystem(api, fs_info.get("id") or fs_info["name"])
                except UserError:
                    fs = None  # already deleted: nothing bills
                if fs is not None:
                    still_billing.append(filesystem_billing_line(fs))
        extra = {**store.box(box.name).extra, "still_billing": still_billing,
                 "terminated_at": time.time()}
        store.update_box(box.name, extra=extra)
        store.record("cloud-terminated", {"instance_id": instance_id,
                                          "still_billing": still_billing}, box=box.name)
        return Released(f"terminated Lambda instance {instance_id} (confirmed: status "
                        "terminated)", still_billing=still_billing)
