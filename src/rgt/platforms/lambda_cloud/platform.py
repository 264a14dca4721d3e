"""Lambda Cloud (On-Demand Cloud): rent an SSH box through its REST API (rgt.platforms.
lambda_cloud.api: the client, capacity, filesystems, what each status bills), on the rented
skeleton (rgt.platforms.rented: create once, record it, wait, register, release).

The platform's shape, and what this module does about it:

- Capacity, not eviction, is the bottleneck (LAM5): `lambda_up` polls `GET /instance-types` for
  `regions_with_capacity_available` and launches the moment a region appears, within a bounded
  wait; a launch that lost the race costs one launch per 10 s (the documented limit).
- A filesystem attaches at launch only and must live in the instance's region (LAM2): we look the
  filesystem up first and refuse a region mismatch before anything is launched (or billed).
- No static IP (LAM10): the IP is read from `GET /instances/{id}` on every launch.
- The meter stops only through `POST /instance-operations/terminate` (LAM3: an in-box shutdown
  leaves the instance in Alert, still billing), and we confirm the instance really reaches
  `terminated`.
- The filesystem outlives the instance and bills $0.20/GiB/month until deleted (LAM6): teardown
  records that in `box.extra["still_billing"]`, so `rgt ls` keeps showing it.
- A launch is never retried blindly (http.AmbiguousCreate): after a lost answer we list
  `GET /instances` for the name we gave the launch and adopt the new instance, recorded in the
  store before anything else can fail.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import OfferQuery, Offers, Request, gpu_choices, refuse_offer_filters
from rgt.platforms.http import ApiClient, ApiError, poll_interval
from rgt.platforms.lambda_cloud import api as lam
from rgt.platforms.lambda_cloud.api import CONSOLE, LAUNCH, POLICY, Notify, capacity, client
from rgt.platforms.rented import RentedPlatform, quiet
from rgt.platforms.rentgroup import Created, Plan, node_name, ssh_target
from rgt.store import Box, Store
from rgt.transport import SshTarget


class LambdaPlatform(RentedPlatform):
    """An SSH box rented through Lambda's API: `rent` launches when capacity appears
    (`lambda_up`), `release` terminates and confirms; the rest is the rented skeleton's."""

    name = "lambda"
    # an instance type by GPU; where it launches; N of them as one box (rgt.platforms.rentgroup)
    supports = frozenset({"gpu", "region", "nodes"})
    rent_options = frozenset({"filesystem", "ssh_key", "wait", "keep_partial"})
    service, thing, kill, create_word = "Lambda", "instance", "terminate", "launch"
    console = f"the console ({CONSOLE})"
    kill_by_hand = "in the console or with POST /instance-operations/terminate"
    kill_trap = "never an in-box shutdown (LAM3)"

    def client(self) -> ApiClient:
        return client()

    def find(self, api: ApiClient, instance_id: str) -> dict[str, Any] | None:
        return lam.get_instance(api, instance_id)

    def named(self, api: ApiClient, name: str) -> list[dict[str, Any]]:
        return lam.named(api, name)

    def destroy(self, api: ApiClient, instance_id: str) -> None:
        # LAM3: the meter stops only through terminate, never an in-box shutdown.
        api.post("/instance-operations/terminate", {"instance_ids": [instance_id]})

    def released(self, inst: dict[str, Any], instance_id: str) -> bool:
        status = inst.get("status")
        if status == "unhealthy":
            raise UserError(f"Lambda instance {instance_id} is unhealthy (Alert) after "
                            f"terminate and may still be billing (LAM3): terminate it "
                            f"in the console ({CONSOLE}) and check it disappears")
        return status in ("terminated", "preempted")

    def still_billing(self, api: ApiClient, box: Box) -> list[str]:
        """A filesystem outlives the instance and bills until deleted (LAM6)."""
        fs_info = box.extra.get("filesystem")
        if not fs_info:
            return []
        try:
            fs = lam.find_filesystem(api, fs_info.get("id") or fs_info["name"])
        except UserError:
            return []  # already deleted: nothing bills
        return [lam.filesystem_billing_line(fs)]

    def released_line(self, instance_id: str, polls: int) -> str:
        return f"terminated Lambda instance {instance_id} (confirmed: status terminated)"

    def booted(self, inst: dict[str, Any] | None, instance_id: str) -> bool:
        status = "terminated" if inst is None else inst.get("status", "")
        if status == "active" and inst and inst.get("ip"):
            return True
        if status in ("terminated", "terminating", "unhealthy", "preempted"):
            raise UserError(f"Lambda instance {instance_id} went {status} while booting; "
                            + ("it may still be billing: terminate it in the console"
                               if status == "unhealthy" else "nothing more is billing"))
        return False

    def booting_line(self, inst: dict[str, Any], instance_id: str) -> str:
        return f"instance {instance_id}: {inst.get('status') or 'pending'}"

    def rent(self, store: Store, request: Request) -> Box:
        """`lambda_up` as `rgt up --profile lambda --gpu H100:1 [--region R]` asks."""
        self.refuse_before_renting(request)
        options = request.options
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


    # a group (`--nodes N`, rgt.platforms.rentgroup): N launches in one region ----------------

    def group_plan(self, api: ApiClient, store: Store, request: Request) -> Plan:
        options = request.options
        if not request.resources.gpu:
            raise UserError(f"to rent a group on Lambda give --gpu TYPE:COUNT (e.g. `rgt up "
                            f"{request.name} --profile lambda --gpu H100:8 --nodes 2`)")
        wait = options.get("wait")  # a nan or negative --wait: refused with the flag (WAIT)
        wait_s = 1800 if wait is None else wait
        # every node's name is checked here, before the first launch
        fs, region, key_name = prepare(api, node_name(request.name, request.resources.nodes - 1),
                                       request.resources.region, options.get("filesystem"),
                                       options.get("ssh_key"))
        data_dir = request.data_dir
        # a filesystem is one NFS share all nodes mount: the group's shared checkpoint home
        durable, extra = storage(fs, data_dir, request.durable_dir, "these nodes")
        return Plan(wait_s=900, identity=options.get("identity"),
                    user=options.get("user") or "ubuntu", port=options.get("port"),
                    data_dir=data_dir, durable_dir=durable, extra=extra,
                    context={"gpus": gpu_choices(request.resources), "fs": fs,
                             "region": region, "key_name": key_name, "capacity_s": wait_s})

    def create_node(self, api: ApiClient, plan: Plan, rank: int, name: str,
                    region: str | None, first: Created | None, before: set[Any],
                    on_wait: Notify) -> Created:
        ctx = plan.context
        # the nodes after the head: its instance type (unless it was adopted), in its region
        gpus = [first.detail["type"]] if first and "type" in first.detail else ctx["gpus"]
        region = region or ctx["region"]
        instance_id, adopted, itype, where = launch_when_capacity(
            self, api, name, gpus, region, ctx["fs"], ctx["key_name"],
            before=before, wait_s=ctx["capacity_s"], poll_s=poll_interval(),
            on_wait=on_wait)
        return Created(rank, name, instance_id, itype.usd_per_hour, where, adopted,
                       detail={"type": itype.name, "filesystem": ctx["fs"] and ctx["fs"]["name"]})

    def node_target(self, row: dict[str, Any], plan: Plan) -> SshTarget:
        return ssh_target(row["ip"], plan.port, plan.user or "ubuntu", plan.identity)

    def node_address(self, row: dict[str, Any]) -> str:
        # the nodes talk over the region's private network where Lambda gives an address on it
        return str(row.get("private_ip") or row["ip"])

    def node_rate(self, row: dict[str, Any]) -> float:
        return float((row.get("instance_type") or {}).get("price_cents_per_hour") or 0) / 100

    def node_region(self, row: dict[str, Any]) -> str | None:
        return (row.get("region") or {}).get("name")

    def offers(self, query: OfferQuery) -> Offers:
        """`rgt offers --profile lambda`: the instance types (those fitting --gpu), their price
        and the regions with capacity right now (LAM5: capacity, not price, is the catch)."""
        return lambda_offers(query)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        return instance_status(box)


def instance_status(box: Box) -> dict[str, Any]:
    """What Lambda says about the box's instance, with what it means for the bill."""
    instance_id = LambdaPlatform().instance_id(box)
    with client() as api:
        inst = lam.get_instance(api, instance_id)
    if inst is None:
        return {"instance_id": instance_id, "status": "gone", "billing": False,
                "advice": "the instance no longer exists"}
    status = inst.get("status", "unknown")
    advice = lam.ADVICE.get(status, "unknown state: treated as billing; check the console")
    return {"instance_id": instance_id, "status": status, "ip": inst.get("ip"),
            "region": (inst.get("region") or {}).get("name"),
            "billing": lam.BILLING.get(status, True), "advice": advice}



def storage(fs: dict | None, data_dir: str | None, durable_dir: str | None, where: str
            ) -> tuple[str, dict[str, Any]]:
    """The durable tier (the attached filesystem, else the data dir) and what `extra` records
    of it. Without a filesystem there is no durable tier on the box: results must be pulled
    home, said in a note naming WHERE ("this box", "these nodes")."""
    durable = durable_dir or (f"/lambda/nfs/{fs['name']}" if fs else data_dir or "/home/ubuntu")
    if fs:
        return durable, {"filesystem": {"name": fs["name"], "id": fs.get("id"),
                                        "region": lam.region_of(fs)}}
    return durable, {"notes": [f"no filesystem attached: nothing on {where} survives "
                               "terminate; pull results home before `rgt down` (LAM1)"]}


def lambda_up(store: Store, name: str, gpu: str | Sequence[str] = "H100:1",
              region: str | None = None,
              filesystem: str | None = None, *, ssh_key: str | None = None,
              wait_s: float = 1800, poll_s: float | None = None, boot_wait_s: float = 900,
              on_wait: Notify = quiet, identity: str | None = None, ssh_user: str = "ubuntu",
              ssh_port: int | None = None, data_dir: str | None = None,
              durable_dir: str | None = None) -> Box:
    """Launch a Lambda instance when capacity appears, wait for it, register it as box `name`.

    `gpu` may be several choices, first preferred: the first with capacity is launched, and
    only one instance ever is (a launch refused for capacity made nothing; a lost answer is
    adopted, never launched again)."""
    cloud = LambdaPlatform()
    gpus = [gpu] if isinstance(gpu, str) else list(gpu)
    cloud.refuse_taken_name(store, name)
    if math.isnan(wait_s):
        raise UserError("--wait: give the seconds to wait for capacity, e.g. --wait 3600")
    poll_s = poll_interval() if poll_s is None else poll_s
    with client() as api:
        fs, region, key_name = prepare(api, name, region, filesystem, ssh_key)
        before = cloud.present(api, name)
        instance_id, adopted, itype, where = launch_when_capacity(
            cloud, api, name, gpus, region, fs, key_name, before=before, wait_s=wait_s,
            poll_s=poll_s, on_wait=on_wait)
        cloud.record_create(store, name, instance_id, adopted, type=itype.name, region=where,
                            asked=gpus, filesystem=fs and fs["name"])
        on_wait(f"launched {itype.name} in {where} (${itype.usd_per_hour:.2f}/h, billing from "
                f"health check): instance {instance_id}")
        inst = cloud.wait_ready(api, instance_id, wait_s=boot_wait_s, poll_s=poll_s,
                                on_wait=on_wait)
    ip = inst["ip"]  # LAM10: read every launch, never remembered
    durable, extra = storage(fs, data_dir, durable_dir, "this box")
    extra.update(instance_type=itype.name, region=where, ip=ip)
    return cloud.register_instance(store, name, instance_id, host=ip, port=ssh_port,
                                   user=ssh_user, identity=identity, rate=itype.usd_per_hour,
                                   data_dir=data_dir, durable_dir=durable, on_wait=on_wait,
                                   extra=extra)


def prepare(api: ApiClient, name: str, region: str | None, filesystem: str | None,
            ssh_key: str | None) -> tuple[dict[str, Any] | None, str | None, str]:
    """Before any launch: the filesystem (its region pins the instance's, LAM2), the SSH key
    Lambda installs, and a name Lambda accepts. Returns (filesystem, region, key name)."""
    fs = None
    if filesystem:
        fs = lam.find_filesystem(api, filesystem)
        fs_region = lam.region_of(fs)
        if region and region != fs_region:
            raise UserError(
                f"filesystem {fs['name']} lives in {fs_region} but you asked for {region}: "
                f"a Lambda filesystem attaches only at launch and only to an instance in its "
                f"own region (LAM2). Use --region {fs_region}, or launch without it")
        region = fs_region
    key_name = lam.ssh_key_name(api, ssh_key)
    if len(name) > 64:
        raise UserError(f"box name {name!r} is {len(name)} characters; Lambda instance "
                        f"names hold at most 64: pick a shorter name")
    return fs, region, key_name


def launch_when_capacity(cloud: LambdaPlatform, api: ApiClient, name: str, gpus: list[str],
                         region: str | None, fs: dict[str, Any] | None, key_name: str, *,
                         before: set[Any], wait_s: float, poll_s: float, on_wait: Notify
                         ) -> tuple[str, bool, lam.InstanceType, str]:
    """One launch named `name` the moment a type fitting `gpus` has capacity (in `region`):
    a launch that lost the race made nothing and is tried again within --wait; a lost answer
    is adopted. Returns (instance id, adopted?, its type, its region)."""
    asked = ", ".join(gpus)
    deadline = time.monotonic() + wait_s  # one --wait for polls and lost races together
    races = 0
    while True:
        itype, where = lam.wait_for_capacity(api, gpus, region, wait_s=wait_s,
                                             poll_s=poll_s, on_wait=on_wait,
                                             deadline=deadline)
        body = {"region_name": where, "instance_type_name": itype.name,
                "ssh_key_names": [key_name],
                "file_system_names": [fs["name"]] if fs else [],
                "name": name}  # no `quantity`: the current spec has none (one is made)
        try:
            launched, adopted = cloud.create_once(
                api, name, before, poll_s=poll_s,
                create=partial(api.post, LAUNCH, body, idempotent=False))
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
    instance_id = str(launched["id"] if adopted else launched["data"]["instance_ids"][0])
    return instance_id, adopted, itype, where


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
