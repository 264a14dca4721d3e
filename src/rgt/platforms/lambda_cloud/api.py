"""Lambda Cloud's control plane: its REST API, and what its answers mean for the bill.

Docs: https://docs.lambda.ai/api/cloud (API base https://cloud.lambdalabs.com/api/v1; basic auth
with the key as the user name, or Bearer), https://docs.lambda.ai/public-cloud/filesystems,
https://docs.lambda.ai/public-cloud/billing.

- Rate limits (docs: "Are API requests rate-limited?", LambdaLabs/docsy-lambda-docs
  content/en/cloud/rate-limiting.md): about one request per second, and one request to
  `/instance-operations/launch` per 10 seconds; a 429 otherwise. `POLICY` paces every call of
  one client to that, so a capacity race (capacity listed, launch refused) costs one launch per
  10 s within `--wait`, never a tight loop.
- Capacity, not eviction, is the bottleneck (LAM5): `wait_for_capacity` polls
  `GET /instance-types` for `regions_with_capacity_available` within a bounded wait.

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

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rgt.errors import UserError
from rgt.platforms.http import ApiClient, ApiError, RatePolicy

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


ADVICE = {
    "booting": "starting; billing begins when it passes health checks",
    "active": "running and billing by the minute",
    "unhealthy": "Alert/unhealthy and STILL BILLING (LAM3): an in-box shutdown does not stop "
                 "the meter; terminate it (`rgt down`) after pulling results",
    "terminating": "terminating; billing stops once terminated",
    "terminated": "terminated; the instance no longer bills",
    "preempted": "preempted: Lambda reclaimed it and it no longer runs; relaunch and "
                 "resume from the checkpoint home, then `rgt down` to clear it (a "
                 "filesystem keeps billing, LAM6)",
}


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


# filesystems --------------------------------------------------------------------------------

def find_filesystem(api: ApiClient, name: str) -> dict[str, Any]:
    filesystems = api.get("/file-systems").get("data", [])
    for fs in filesystems:
        if fs.get("name") == name or fs.get("id") == name:
            return fs
    known = ", ".join(f"{fs.get('name')} ({region_of(fs)})" for fs in filesystems) or "none"
    raise UserError(f"no Lambda filesystem named {name!r} (yours: {known}); create it in the "
                    f"console (Storage) in the region you will launch in — it cannot be attached "
                    f"after launch (LAM2)")


def region_of(fs: dict[str, Any]) -> str:
    region = fs.get("region")
    return region.get("name", "") if isinstance(region, dict) else str(region or "")


def filesystem_billing_line(fs: dict[str, Any]) -> str:
    gib = (fs.get("bytes_used") or 0) / 2**30
    return (f"Lambda filesystem {fs.get('name')} in {region_of(fs)} ({gib:.1f} GiB used): "
            f"${FS_USD_PER_GIB_MONTH:.2f}/GiB/month ≈ ${gib * FS_USD_PER_GIB_MONTH:.2f}/month "
            f"until you delete it (console → Storage → Delete) (LAM6)")


# instances ----------------------------------------------------------------------------------

def get_instance(api: ApiClient, instance_id: str) -> dict[str, Any] | None:
    """The instance (GET /instances/{id}); None once Lambda answers 404: gone, nothing bills."""
    try:
        return (api.get(f"/instances/{instance_id}") or {}).get("data", {})
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def named(api: ApiClient, name: str) -> list[dict[str, Any]]:
    """Live instances (GET /instances) that carry `name`."""
    return [i for i in (api.get("/instances") or {}).get("data", [])
            if i.get("name") == name and i.get("status") != "terminated"]


def ssh_key_name(api: ApiClient, ssh_key: str | None) -> str:
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

