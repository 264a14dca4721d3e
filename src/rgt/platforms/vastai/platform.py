"""vast.ai through its REST API.

Docs: https://docs.vast.ai/api-reference (base https://console.vast.ai/api/v0, Authorization:
Bearer KEY): search offers (POST /bundles/ with the query as the body, as the docs and the
official `vastai` 1.9.1 client's `search offers` send it; the older `GET /bundles/?q=` is legacy),
create instance (PUT /asks/{offer_id}/), show
instances (GET /instances/ — actual_status, intended_status, cur_state, status_msg), manage
instance (PUT /instances/{id}/ with state), destroy instance (DELETE /instances/{id}/);
https://vast.ai/article/Rental-Types (bids); docs.vast.ai reference/billing.

A marketplace of third-party hosts, and what this module does about it:

- `offers` searches with safe filters on by default: verified, rentable, a direct port and a
  reliability floor (VAST7, VAST8), and shows the bandwidth price next to $/h (VAST9).
- `vast_up` refuses an image whose CUDA is newer than the host's `cuda_max_good` (VAST5) before
  creating anything, creates with direct SSH and an onstart hook that relaunches unfinished runs
  after any container restart or preemption (tmux does not survive one), passes secrets as `env`
  at create and never in the image or onstart string (VAST11), waits through `loading` showing
  `status_msg` (VAST13) and reads the real SSH host:port from the API (VAST6).
- The rate rgt records is what the instance bills per hour: its compute (the offer's `dph_base`,
  or the bid) plus the disk it was created with (`storage_cost` $/GB/month × disk GB / 730 h):
  a stopped instance keeps billing that disk part.
- `vast_status` turns the instance's state machine into what it means: preempted shows as paused
  (VAST4), a stuck Scheduling as VAST3 with its fix, Offline as VAST7, stopped as VAST1.
  `rgt watch` asks it before probing over SSH (`watch_gate`): a run on an instance that is not
  running reads "paused" with that cause, and resumes being probed once the instance runs.
- Status table (`vast_status`; actual_status / intended_status → rgt state → billing?):

      actual_status          intended   rgt state                 billing
      null (not yet set)     running    loading (VAST13)          yes: the disk from create
      created, loading       running    loading (VAST13)          yes
      running                running    running                   yes: compute + disk
      scheduling             running    scheduling → stuck (VAST3) yes: disk
      exited/stopped/...     running    paused, preempted (VAST4) yes: disk
      any                    stopped    stopped (VAST1)           yes: disk, until destroyed
      offline                any        offline (VAST7)           yes
      (lookup says null/404) -          gone                      no
- Instance lists page (`next_token`, at most 25 per page: the official `vastai` 1.9.1 client's
  `show_instances` follows it; GET /instances/ is announced to do the same): `list_instances`
  reads every page. One instance is asked about directly (GET /instances/{id}/ → {"instances":
  row | null}, the client's `show_instance`): only that saying null/404 makes it "gone"; a row
  missing from a list is "not seen", never gone (watch must not say vanished, destroy must not be
  confirmed from it).
- A create (PUT /asks/{id}/) is never retried blindly: after a lost answer rgt lists instances
  for the `label` it gave the create and adopts the new one, recorded in the store at once.
- `VastPlatform.release` destroys: the only verb that stops the whole meter. `rgt down` calls
  it only after the Iron Law. A plain stop is never offered as a saving: its disk keeps billing.

The key is `VAST_API_KEY`, read from the environment by name (never argv, never printed).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import (
    OfferQuery,
    Offers,
    Released,
    Request,
    Unavailable,
    first_available,
    gpu_choices,
    refuse_offer_filters,
    refuse_options,
    refuse_unsupported,
    size_gb,
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
from rgt.remote.summary import summarize
from rgt.store import TERMINAL, Box, Store
from rgt.transport import SshTarget

API_URL = "https://console.vast.ai/api/v0"  # docs.vast.ai/api-reference
KEY_ENV = "VAST_API_KEY"
URL_ENV = "RGT_VAST_API_URL"
MIN_RELIABILITY = 0.98
DISK_GB = 50.0  # what `rgt up --profile vastai` creates without --disk
# vast.ai publishes per-endpoint limits and answers 429 with Retry-After (the official client
# honours it); we pace lightly and let Retry-After lead.
POLICY = RatePolicy(min_interval_s=0.2)
SCHEDULING_STUCK_S = 120.0  # "stuck > 30 s ⇒ the GPU is likely rented by someone else" (VAST3)

Notify = Callable[[str], None]


def client() -> ApiClient:
    return ApiClient(service="vast.ai", key_env=KEY_ENV, url_env=URL_ENV, default_url=API_URL,
                     auth="bearer", policy=POLICY)


def _quiet(_: str) -> None:
    pass


# offers ------------------------------------------------------------------------------------

@dataclass
class Offer:
    id: int
    gpu_name: str
    num_gpus: int
    usd_per_hour: float
    bandwidth_up_usd_per_gb: float
    bandwidth_down_usd_per_gb: float
    reliability: float
    verified: bool
    direct_ports: int
    cuda_max_good: float | None
    driver_version: str
    disk_gb: float
    storage_usd_per_gb_month: float | None
    min_bid: float | None
    location: str
    compute_usd_per_hour: float = 0.0  # dph_base: dph_total without the storage it includes

    @classmethod
    def from_api(cls, o: dict[str, Any]) -> Offer:
        return cls(
            id=int(o["id"]), gpu_name=str(o.get("gpu_name", "")),
            num_gpus=int(o.get("num_gpus") or 0), usd_per_hour=float(o.get("dph_total") or 0),
            bandwidth_up_usd_per_gb=float(o.get("inet_up_cost") or 0),
            bandwidth_down_usd_per_gb=float(o.get("inet_down_cost") or 0),
            reliability=float(o.get("reliability2", o.get("reliability")) or 0),
            verified=bool(o.get("verified")), direct_ports=int(o.get("direct_port_count") or 0),
            cuda_max_good=_float(o.get("cuda_max_good")),
            driver_version=str(o.get("driver_version") or ""),
            disk_gb=float(o.get("disk_space") or 0),
            storage_usd_per_gb_month=_float(o.get("storage_cost")),
            min_bid=_float(o.get("min_bid")), location=str(o.get("geolocation") or ""),
            compute_usd_per_hour=_compute_price(o))

    def hourly_rate(self, disk_gb: float, bid: float | None = None) -> float:
        """What an instance on this offer bills an hour: compute (or the bid) plus its disk."""
        compute = bid if bid is not None else self.compute_usd_per_hour
        return compute + (self.storage_usd_per_gb_month or 0.0) * disk_gb / HOURS_PER_MONTH

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


HOURS_PER_MONTH = 730  # storage_cost is $/GB/month


def _compute_price(o: dict[str, Any]) -> float:
    """$/h for the GPU alone: dph_base, else dph_total less the storage it was priced with."""
    base = _float(o.get("dph_base"))
    if base is not None:
        return base
    return (_float(o.get("dph_total")) or 0.0) - (_float(o.get("storage_total_cost")) or 0.0)


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def offer_query(gpu: str, *, num_gpus: int = 1, max_price: float | None = None,
                min_reliability: float = MIN_RELIABILITY, verified: bool = True,
                direct: bool = True, interruptible: bool = False, limit: int = 64
                ) -> dict[str, Any]:
    """The body of POST /bundles/: safe by default (VAST7: verified + reliable; VAST8: direct)."""
    q: dict[str, Any] = {
        "gpu_name": {"eq": gpu.replace("_", " ")},  # the CLI's RTX_4090 is the API's "RTX 4090"
        "num_gpus": {"eq": num_gpus},
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "reliability2": {"gte": min_reliability},
        "order": [["dph_total", "asc"]],
        "type": "bid" if interruptible else "on-demand",
        "limit": limit,
    }
    if verified:
        q["verified"] = {"eq": True}
    if direct:
        q["direct_port_count"] = {"gte": 1}
    if max_price is not None:
        q["dph_total"] = {"lte": max_price}
    return q


def offers(gpu: str = "RTX_4090", max_price: float | None = None, *, num_gpus: int = 1,
           min_reliability: float = MIN_RELIABILITY, verified: bool = True, direct: bool = True,
           interruptible: bool = False, limit: int = 20) -> list[Offer]:
    """Rentable offers for `gpu`, cheapest first, with bandwidth price and host CUDA/driver.

    The filters are also applied here, not only sent: a marketplace answer is a claim.
    """
    if limit < 1:
        raise UserError(f"--limit {limit}: give the number of offers to show, 1 or more")
    q = offer_query(gpu, num_gpus=num_gpus, max_price=max_price,
                    min_reliability=min_reliability, verified=verified, direct=direct,
                    interruptible=interruptible, limit=max(limit, 64))
    with client() as api:
        rows = search(api, q)
    found = [Offer.from_api(o) for o in rows]
    found = [o for o in found
             if o.reliability >= min_reliability and (o.verified or not verified)
             and (o.direct_ports >= 1 or not direct)
             and (max_price is None or o.usd_per_hour <= max_price)]
    found.sort(key=lambda o: (o.usd_per_hour, -o.reliability,
                              o.bandwidth_up_usd_per_gb + o.bandwidth_down_usd_per_gb))
    return found[:limit]


class NoOffer(Unavailable):
    """No offer matches the GPU asked for (with the safe filters on): nothing was rented."""


def cheapest_offer(gpu: str, *, interruptible: bool, max_price: float | None,
                   on_wait: Notify = _quiet) -> int:
    """The offer `rgt up --gpu MODEL:COUNT` rents: the cheapest with the safe filters on."""
    name, _, count = gpu.partition(":")
    found = offers(name, max_price, num_gpus=int(count or 1), interruptible=interruptible,
                   limit=1)
    if not found:
        under = f" under ${max_price:g}/h" if max_price is not None else ""
        raise NoOffer(f"no verified, reliable vast.ai offer with direct SSH for --gpu {gpu}"
                      f"{under}; nothing was rented. Check the GPU name as vast.ai spells it "
                      "(RTX_4090, H100_SXM) with `rgt offers`",
                      why=f"no verified, reliable offer with direct SSH{under}")
    on_wait(f"cheapest matching offer: {found[0].id} ({found[0].num_gpus}x "
            f"{found[0].gpu_name}, ${found[0].usd_per_hour:.3f}/h)")
    return found[0].id


def offer_table(query: OfferQuery) -> Offers:
    """`offers` as `rgt offers` shows them: cheapest first, bandwidth next to $/h (VAST9)."""
    opts = dict(query.options)
    refuse_offer_filters("vastai", {"min_reliability", "unverified"}, opts)
    if query.region:
        raise UserError("--region: vast.ai offers are filtered by GPU and price here; the "
                        "table's `where` column shows each host's location")
    gpu, count = query.model_and_count()
    gpu = gpu or "RTX_4090"
    reliability = opts.get("min_reliability")
    reliability = MIN_RELIABILITY if reliability is None else float(reliability)
    rows = offers(gpu, query.max_price, num_gpus=count or 1, min_reliability=reliability,
                  verified=not opts.get("unverified"), interruptible=query.spot,
                  limit=query.limit)
    price = "" if query.max_price is None else f"max ${query.max_price:g}/h, "
    return Offers(
        title=f"vast.ai {gpu} offers (verified, direct SSH)",
        columns=["offer", "gpus", "$/h", "bandwidth $/GB up/down", "reliability",
                 "cuda max / driver", "disk GB", "where"],
        rows=[[str(o.id), f"{o.num_gpus}× {o.gpu_name}", f"{o.usd_per_hour:.3f}",
               f"{o.bandwidth_up_usd_per_gb:.3f} / {o.bandwidth_down_usd_per_gb:.3f}",
               f"{o.reliability:.3f}", f"{o.cuda_max_good} / {o.driver_version}",
               f"{o.disk_gb:.0f}", o.location] for o in rows],
        records=[o.as_row() for o in rows],
        empty=(f"no {gpu} offers match ({price}reliability ≥ {reliability:g}); check the GPU "
               "name (RTX_4090, H100_SXM) or loosen --max-price or --min-reliability"),
        next="Bandwidth is billed per GB in both directions, in every state (VAST9). "
             "Next: rgt up NAME --profile vastai --offer ID --image IMG --disk GB")


def search(api: ApiClient, query: dict[str, Any]) -> list[dict[str, Any]]:
    """POST /bundles/ with the query as the JSON body (docs.vast.ai search-offers; the official
    client's `search offers`): the legacy GET /bundles/?q= puts it in the URL instead."""
    return (api.post("/bundles/", query) or {}).get("offers") or []


class OfferGone(Unavailable):
    """The offer was rented or withdrawn before rgt's create: nothing was created."""

    def __init__(self, message: str) -> None:
        super().__init__(message, why="its cheapest offer was taken before the create")


def get_offer(api: ApiClient, offer_id: int, disk_gb: float | None = None) -> Offer:
    """One offer by id, priced (dph_total) with `disk_gb` of storage as the create will ask."""
    query: dict[str, Any] = {"id": {"eq": offer_id}}
    if disk_gb is not None:
        query["allocated_storage"] = disk_gb
    rows = search(api, query)
    if not rows:
        raise OfferGone(f"vast.ai offer {offer_id} is gone (rented or withdrawn); pick another "
                        f"with `rgt offers`")
    return Offer.from_api(rows[0])


# CUDA / driver (VAST5) ----------------------------------------------------------------------

def image_cuda(image: str) -> float | None:
    """The CUDA version an image tag names ('pytorch/pytorch:2.4.0-cuda12.4-…' → 12.4)."""
    match = re.search(r"cuda[-_:]?(\d+)\.(\d+)", image.lower())
    return float(f"{match.group(1)}.{match.group(2)}") if match else None


def check_cuda(image: str, offer: Offer, declared: float | None = None) -> str | None:
    """Refuse an image whose CUDA is newer than the host driver supports; else a note or None."""
    cuda = declared if declared is not None else image_cuda(image)
    if cuda is None:
        return (f"could not tell the CUDA version of {image} from its tag; the host supports up "
                f"to CUDA {offer.cuda_max_good}. The onstart hook runs nvidia-smi first (VAST5)")
    if offer.cuda_max_good is not None and cuda > offer.cuda_max_good + 1e-9:
        raise UserError(
            f"{image} needs CUDA {cuda:g} but offer {offer.id}'s host driver "
            f"{offer.driver_version or '?'} supports at most CUDA {offer.cuda_max_good:g}: "
            f"torch would see no GPU (VAST5). Pick an image built for CUDA "
            f"≤ {offer.cuda_max_good:g}, or an offer with a newer driver "
            f"(`rgt offers` shows cuda_max_good)")
    return None


# create --------------------------------------------------------------------------------

SECRET_ASSIGN = re.compile(r"\b([A-Z][A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD))\s*=\s*\S")


def onstart_script(data_dir: str, user_onstart: str = "") -> str:
    """/root/onstart.sh: runs on EVERY container start, so it is the relaunch hook.

    tmux dies with a container restart or a preemption pause; this relaunches each unfinished
    rgt run under `data_dir` with its own runner (the job resumes from its checkpoint).
    """
    runs = shlex.quote(data_dir) + "/rgt/*/"
    return "\n".join([
        "#!/bin/bash",
        "# rgt: relaunch unfinished runs after a container restart or preemption (VAST4)",
        "nvidia-smi >/dev/null 2>&1 || echo 'rgt: nvidia-smi failed: image CUDA vs host "
        "driver? (VAST5)' >&2",
        *([user_onstart] if user_onstart else []),
        f"for d in {runs}; do",
        '  [ -f "$d/run.json" ] && [ -f "$d/runner.py" ] || continue',
        # the interpreter `rgt up` found (runs launched before it was recorded: python3)
        '  py=$(cat "$d/interpreter" 2>/dev/null || echo python3)',
        '  s=$("$py" -c \'import json,sys;'
        "print(json.load(open(sys.argv[1])).get(\"status\",\"\"))'"
        ' "$d/state.json" 2>/dev/null)',
        '  case "$s" in succeeded|failed|cancelled) continue;; esac',
        '  setsid nohup "$py" "$d/runner.py" "$d" </dev/null >>"$d/runner.out" 2>&1 &',
        "done",
        "",
    ])


def secret_env(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """KEY → value for the named secrets, from this machine's environment (VAST11)."""
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise UserError(f"secrets not set in this shell: {', '.join(missing)}; export them "
                        "(they go to vast.ai as env at create, never into the image or onstart)")
    return {n: os.environ[n] for n in names}


def _refuse_secrets_in_onstart(onstart: str, secrets: dict[str, str]) -> None:
    leaked = [n for n, v in secrets.items() if v and v in onstart]
    if leaked or SECRET_ASSIGN.search(onstart):
        name = leaked[0] if leaked else SECRET_ASSIGN.search(onstart).group(1)  # type: ignore
        raise UserError(f"the onstart command sets {name}: vast.ai stores the onstart string "
                        f"server-side (VAST11). Pass it with --secret {name} instead (it goes in "
                        f"as env at create)")


def list_instances(api: ApiClient, max_pages: int = 1000) -> list[dict[str, Any]]:
    """Every instance, reading every page (`next_token` → `after_token`, as the official client
    does); a list that stops after page one would make a billing instance look gone."""
    rows: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    for _ in range(max_pages):
        data = api.get("/instances/", **params) or {}
        rows += data.get("instances") or []
        token = data.get("next_token")
        if not token:
            return rows
        params = {"after_token": token}
    raise UserError(f"vast.ai kept answering more instance pages after {max_pages}; stopped")


ONSTART_MAX = 4096  # onstart + args, characters (vast.ai's create limit)
ENV_VALUE_MAX = 256


def _refuse_over_limits(body: dict[str, Any]) -> None:
    """What vast.ai would refuse at create, refused here with the fix, before anything bills."""
    if len(body.get("onstart") or "") > ONSTART_MAX:
        raise UserError(f"the onstart script is {len(body['onstart'])} characters; vast.ai "
                        f"takes at most {ONSTART_MAX}: shorten --onstart (put a long script in "
                        f"the pushed code and call it)")
    long = [k for k, v in (body.get("env") or {}).items() if len(str(v)) > ENV_VALUE_MAX]
    if long:
        raise UserError(f"--secret {long[0]} is longer than {ENV_VALUE_MAX} characters, the most "
                        f"vast.ai takes for an env value: push it as a file instead")


def find_instance(api: ApiClient, instance_id: int | str) -> dict[str, Any] | None:
    """The instance by a direct lookup (GET /instances/{id}/); None only when vast.ai says it
    does not exist (404, or {"instances": null} as the official client reads it)."""
    try:
        data = api.get(f"/instances/{int(instance_id)}/", owner="me") or {}
    except ApiError as err:
        if err.status == 404:
            return None
        raise
    row = data.get("instances")
    return row if isinstance(row, dict) else None


def _labelled(api: ApiClient, label: str) -> list[dict[str, Any]]:
    return [i for i in list_instances(api) if i.get("label") == label]


def _adopt(api: ApiClient, label: str, before: set[Any], err: ApiError, *, poll_s: float,
           looks: int = 5) -> int:
    """The instance a create with a lost answer made, found by its label; never a re-create."""
    fresh = adopt_lost_create(lambda: _labelled(api, label), before, poll_s=poll_s, looks=looks)
    if len(fresh) == 1:
        return int(fresh[0]["id"])
    if fresh:
        ids = ", ".join(str(i["id"]) for i in fresh)
        raise UserError(f"the create answer was lost ({err}) and vast.ai now lists "
                        f"{len(fresh)} new instances labelled {label!r} ({ids}), ALL "
                        f"BILLING: destroy the extras (vastai destroy instance ID)")
    raise UserError(f"the create answer was lost ({err}) and no new instance labelled "
                    f"{label!r} is listed after {looks} looks; rgt did not create again. "
                    f"Check `vastai show instances` before retrying: one may still appear")


def ssh_endpoint(inst: dict[str, Any]) -> tuple[str, int, str]:
    """(host, port, 'direct'|'proxy') as the API reports them now (VAST6: never assume 22)."""
    mapped = (inst.get("ports") or {}).get("22/tcp") or []
    if inst.get("public_ipaddr") and mapped:
        return str(inst["public_ipaddr"]).strip(), int(mapped[0]["HostPort"]), "direct"
    if inst.get("ssh_host") and inst.get("ssh_port"):
        return str(inst["ssh_host"]), int(inst["ssh_port"]), "proxy"
    raise UserError("vast.ai reports no SSH endpoint for this instance yet")


def wait_for_running(api: ApiClient, instance_id: int, *, wait_s: float, poll_s: float,
                     on_wait: Notify) -> dict[str, Any]:
    """Wait through created → loading → running, showing status_msg as it changes (VAST13)."""
    deadline = time.monotonic() + wait_s
    last = None
    while True:
        inst = find_instance(api, instance_id)
        if inst is None:
            raise UserError(f"vast.ai instance {instance_id} disappeared while starting (the "
                            f"host may have dropped it); pick another offer")
        actual = inst.get("actual_status") or "created"
        shown = (actual, inst.get("status_msg"))
        if actual == "running" and _has_ssh(inst):
            return inst
        if actual == "offline":
            raise UserError(f"vast.ai instance {instance_id}'s host went offline while starting "
                            f"(VAST7); destroy it (`rgt cloud-status` shows it) and pick a "
                            f"verified, reliable offer")
        if shown != last:
            msg = inst.get("status_msg") or ""
            on_wait(f"instance {instance_id}: {actual}" + (f" — {msg}" if msg else ""))
            last = shown
        if time.monotonic() > deadline:
            raise UserError(
                f"vast.ai instance {instance_id} is still {actual} after {wait_s:.0f} s "
                f"(last message: {inst.get('status_msg') or 'none'}) and is billing its disk. "
                f"Read `vastai show logs {instance_id}` for image-pull progress; if stuck, destroy "
                f"it and re-create on a faster offer or with a slimmer image (VAST13)")
        time.sleep(poll_s)


def _has_ssh(inst: dict[str, Any]) -> bool:
    try:
        ssh_endpoint(inst)
    except UserError:
        return False
    return True


def vast_up(store: Store, name: str, offer_id: int, image: str, disk_gb: float, *,
            bid: float | None = None, onstart: str = "", secrets: tuple[str, ...] = (),
            image_cuda_version: float | None = None, wait_s: float = 900,
            poll_s: float | None = None, on_wait: Notify = _quiet, identity: str | None = None,
            data_dir: str | None = None, durable_dir: str | None = None) -> Box:
    """Create an instance on `offer_id`, wait until SSH answers, register it as box `name`."""
    existing = store.find_box(name)
    if existing and existing.state == "up":
        raise UserError(f"a box named {name!r} is already up; pick another name")
    if not (math.isfinite(disk_gb) and disk_gb >= 10):
        raise UserError(f"--disk {disk_gb:g}: give at least 10 GB, and it can never grow later: "
                        "over-provision for the image, caches and checkpoints (VAST10)")
    if bid is not None and not (math.isfinite(bid) and bid > 0):
        raise UserError(f"--bid {bid:g}: give the most you will pay, in USD per hour (e.g. "
                        "--bid 0.2)")
    poll_s = poll_interval() if poll_s is None else poll_s
    env = secret_env(list(secrets))
    _refuse_secrets_in_onstart(onstart, env)
    data_dir = data_dir or "/workspace"
    with client() as api:
        offer = get_offer(api, offer_id, disk_gb)
        note = check_cuda(image, offer, image_cuda_version)  # VAST5, before anything bills
        if note:
            on_wait(note)
        if offer.direct_ports < 1:
            on_wait(f"offer {offer.id} has no direct port: SSH goes through vast's proxy, which "
                    f"stalls on transfers over ~1 GB (VAST8)")
        if bid is not None:
            if offer.min_bid is not None and bid < offer.min_bid:
                raise UserError(f"bid ${bid:.3f}/h is below offer {offer.id}'s minimum "
                                f"${offer.min_bid:.3f}/h")
            on_wait(f"interruptible bid ${bid:.3f}/h: it is fixed at create and cannot be raised "
                    f"later; if outbid, the instance pauses with ~0 s notice (VAST4)")
        body: dict[str, Any] = {
            "client_id": "me", "image": image, "disk": disk_gb, "label": name,
            "runtype": "ssh_direct",  # direct TCP SSH (VAST8)
            "onstart": onstart_script(data_dir, onstart), "env": env,
        }
        if bid is not None:
            body["price"] = bid
        _refuse_over_limits(body)
        # Instances already labelled `name` are not ours to adopt after a lost answer.
        before = {i.get("id") for i in _labelled(api, name)}
        adopted = False
        try:
            created = api.put(f"/asks/{offer.id}/", body, idempotent=False)
        except AmbiguousCreate as err:
            created = {"success": True, "new_contract": _adopt(api, name, before, err,
                                                               poll_s=poll_s)}
            adopted = True
        except ApiError as err:  # a refusal made nothing; a taken offer is said as such
            if err.code == "no_such_ask":
                raise OfferGone(f"vast.ai offer {offer.id} was rented by someone else before "
                                f"rgt's create ({err}); nothing was created") from None
            raise
        if not created or not created.get("success") or not created.get("new_contract"):
            raise UserError(f"vast.ai did not create an instance on offer {offer.id}: "
                            f"{api.scrub(json.dumps(created))[:200]}")
        instance_id = int(created["new_contract"])
        # In the store before anything else can fail: the instance bills from here.
        store.record("cloud-launch", {"platform": "vastai", "instance_id": instance_id,
                                      "offer": offer.id, "image": image, "bid": bid,
                                      "adopted": adopted}, box=name)
        rate = offer.hourly_rate(disk_gb, bid)
        on_wait(f"created instance {instance_id} on offer {offer.id} (${rate:.3f}/h with "
                f"{disk_gb:g} GB disk); waiting for it")
        inst = wait_for_running(api, instance_id, wait_s=wait_s, poll_s=poll_s,
                                on_wait=on_wait)
    host, port, kind = ssh_endpoint(inst)
    target = SshTarget(host=host, port=port, user="root",
                       identity=Path(identity).expanduser() if identity else None)
    box = register_rented(store, name, load_profile("vastai"), target,
                          instance=f"vast.ai instance {instance_id}",
                          stop_hint="destroy it in the console", rate=rate, data_dir=data_dir,
                          durable_dir=durable_dir or data_dir, on_retry=on_wait,
                          pause_s=min(3.0, poll_interval()))
    extra = {**box.extra, "platform": "vastai", "instance_id": instance_id, "offer_id": offer.id,
             "image": image, "disk_gb": disk_gb, "ssh": f"{kind} {host}:{port}",
             "interruptible_bid": bid,
             "bandwidth_usd_per_gb": {"up": offer.bandwidth_up_usd_per_gb,
                                      "down": offer.bandwidth_down_usd_per_gb},
             "notes": ["durable copies are off-box: pull results home before `rgt down` "
                       "(destroy deletes the disk, VAST2)"]}
    store.update_box(name, extra=extra)
    return store.box(name)


# status ------------------------------------------------------------------------------------

PAUSED = ("exited", "stopped", "inactive", "paused")


def vast_status(inst: dict[str, Any] | None, *, scheduling_for_s: float = 0.0,
                stuck_after_s: float = SCHEDULING_STUCK_S) -> dict[str, Any]:
    """Map vast.ai's actual/intended/cur_state/status_msg to a state and what to do about it.

    States: loading, running, paused (preempted / outbid), scheduling, stuck-scheduling (VAST3),
    stopped (VAST1), offline (VAST7), gone.
    """
    if inst is None:
        return {"state": "gone", "gotcha": None, "billing": False,
                "advice": "the instance no longer exists (destroyed); nothing bills for it"}
    actual = str(inst.get("actual_status") or "").lower()
    intended = str(inst.get("intended_status") or "").lower()
    cur = str(inst.get("cur_state") or "").lower()
    msg = str(inst.get("status_msg") or "")
    base = {"actual": actual, "intended": intended, "cur_state": cur, "status_msg": msg}
    if actual == "offline" or cur == "offline" or "offline" in msg.lower():
        return {**base, "state": "offline", "gotcha": "VAST7", "billing": True,
                "advice": "the host went offline: treat it as lost; re-launch on a verified, "
                          "reliable offer from your off-box checkpoint, and destroy this one"}
    if intended == "stopped":
        return {**base, "state": "stopped", "gotcha": "VAST1", "billing": True,
                "advice": "stopped: compute is off but the disk KEEPS BILLING, forever, even "
                          "at a negative balance. Pull results, then `rgt down` (destroy)"}
    if actual == "scheduling" or (intended == "running" and "schedul" in msg.lower()):
        if scheduling_for_s > stuck_after_s:
            return {**base, "state": "stuck-scheduling", "gotcha": "VAST3", "billing": True,
                    "advice": f"waiting {scheduling_for_s / 60:.0f} min for its own GPU, which "
                              "someone else has rented; it may never come back. Create a NEW "
                              "instance (same host if you need its volume, or another offer) "
                              "and resume from your off-box checkpoint; don't wait"}
        return {**base, "state": "scheduling", "gotcha": None, "billing": True,
                "advice": "waiting for its GPU to free up"}
    if actual in ("loading", "created", "") and intended in ("running", ""):
        return {**base, "state": "loading", "gotcha": "VAST13", "billing": True,
                "advice": "pulling the image and booting (1–5 min, longer for fat images); "
                          "`vastai show logs ID` shows progress"}
    if actual == "running":
        return {**base, "state": "running", "gotcha": None, "billing": True,
                "advice": "running and billing (compute, disk and bandwidth)"}
    if intended == "running" and actual in PAUSED:
        return {**base, "state": "paused", "gotcha": "VAST4", "billing": True,
                "advice": "preempted (outbid or an on-demand rental took the GPU): paused, disk "
                          "kept and billing. It resumes when the GPU frees, and onstart "
                          "relaunches the run; the bid cannot be raised — re-launch elsewhere "
                          "from a checkpoint if it stays paused"}
    return {**base, "state": actual or "unknown", "gotcha": None, "billing": True,
            "advice": "unrecognised state: check the console"}


def instance_status(store: Store, box: Box,
                    stuck_after_s: float = SCHEDULING_STUCK_S) -> dict[str, Any]:
    """vast_status for the box's instance, remembering since when it has been Scheduling."""
    instance_id = _instance_id(box)
    with client() as api:
        inst = find_instance(api, instance_id)
    extra = dict(box.extra)
    since = extra.get("scheduling_since")
    scheduling = inst is not None and (str(inst.get("actual_status")) == "scheduling"
                                       or "schedul" in str(inst.get("status_msg") or "").lower())
    now = time.time()
    if scheduling and since is None:
        since = extra["scheduling_since"] = now
    elif not scheduling and since is not None:
        since = None
        extra.pop("scheduling_since", None)
    if extra != box.extra:
        store.update_box(box.name, extra=extra)
    status = vast_status(inst, scheduling_for_s=now - since if since else 0.0,
                         stuck_after_s=stuck_after_s)
    if inst is not None:
        status["ssh"] = None
        if _has_ssh(inst):
            host, port, kind = ssh_endpoint(inst)
            status["ssh"] = f"{kind} {host}:{port}"  # as `vast_up` records it
    return {"instance_id": instance_id, **status}


def set_state(box: Box, state: str) -> str:
    """PUT /instances/{id}/ {state}: 'running' resumes, 'stopped' stops compute ONLY (VAST1)."""
    if state not in ("running", "stopped"):
        raise UserError("state must be running or stopped")
    instance_id = _instance_id(box)
    with client() as api:
        api.put(f"/instances/{instance_id}/", {"state": state})
    if state == "stopped":
        return (f"stopped vast.ai instance {instance_id}: compute billing halts but its disk KEEPS "
                f"BILLING until destroyed (VAST1) — this is not a way to save money; to stop the "
                f"meter, pull and verify, then `rgt down {box.name}`")
    return (f"asked vast.ai to start instance {instance_id}; it waits for its own GPU and can sit "
            f"in Scheduling (VAST3) — check `rgt cloud-status {box.name}`")


def _instance_id(box: Box) -> int:
    instance_id = box.extra.get("instance_id")
    if not instance_id:
        raise UserError(f"box {box.name!r} has no vast.ai instance id (registered by hand with "
                        "`rgt up --ssh`, not rented by rgt): destroy it in the console")
    return int(instance_id)


# watch -------------------------------------------------------------------------------------

def watch_gate(store: Store, box: Box, run: Any) -> dict[str, Any] | None:
    """What `rgt watch` shows while the instance cannot run the job; None when it can (probe).

    A preempted, scheduling, loading, stopped or offline instance has no processes to probe:
    the run reads "paused" with the instance's state, gotcha and fix as its cause, and is never
    stored as ended. Once the instance runs again the onstart hook relaunches the run and the
    usual SSH probe takes over. A destroyed instance took the run's disk with it: "vanished".
    """
    if not box.extra.get("instance_id"):
        return None  # registered by hand: no instance to ask about
    try:
        status = instance_status(store, box)
    except UserError:
        return None  # the API is unreachable or the key unset: SSH may still answer
    if status["state"] == "running":
        return None
    msg = f": {status['status_msg']}" if status.get("status_msg") else ""
    gotcha = f" ({status['gotcha']})" if status.get("gotcha") else ""
    cause = f"vast.ai instance {status['instance_id']} is {status['state']}{gotcha}{msg}"
    if run.status in TERMINAL:
        run_status = run.status  # it ended before the instance stopped; that stays true
    elif status["state"] == "gone":
        run_status = "vanished"
    else:
        run_status = "paused"
    return {**summarize({}), "status": run_status, "exit_code": run.exit_code,
            "causes": [cause], "advice": status["advice"]}


# teardown ----------------------------------------------------------------------------------

class VastPlatform(SshPlatform):
    """An SSH box rented on vast.ai's marketplace: `provision` creates on an offer
    (`vast_up`), `gate` tells `rgt watch` the instance's state before any SSH probe, `release`
    destroys (the only full meter stop) and confirms; the rest is `SshPlatform`'s."""

    name = "vastai"
    restart_hook = "vast.ai onstart"  # /root/onstart.sh relaunches unfinished runs
    # gpu/spot/bid pick the offer when --offer is not given (the cheapest safe one); disk
    # and image go into the create
    supports = frozenset({"gpu", "disk", "image", "spot", "bid"})
    rents = True
    confirm_s: float = 120

    def rent(self, store: Store, request: Request) -> Box:
        """`vast_up` on --offer ID, or on the cheapest safe offer for --gpu MODEL:COUNT."""
        r, options = request.resources, request.options
        refuse_unsupported(self.name, self.supports, r)
        refuse_options(self.name, {"offer", "onstart", "secrets", "image_cuda", "wait",
                                   "identity", "user", "port", "ssh_config"}, options)
        if "user" in options or "port" in options:
            raise UserError("vast.ai instances log in as root on the port the API reports "
                            "(VAST6): drop --user/--port")
        if request.rate is not None:
            raise UserError("--rate is for a box you rented by hand: when rgt rents, the price "
                            "comes from the API")
        if options.get("ssh_config"):
            raise UserError("--ssh-config goes with --host; a rented instance's address comes "
                            "from the API")
        offer = options.get("offer")
        if not r.image or (offer is None and not r.gpu):
            raise UserError("to rent on vast.ai give --offer ID --image IMAGE [--disk GB] (find "
                            "an offer with `rgt offers`), or --gpu MODEL:COUNT --image IMAGE for "
                            "the cheapest verified one; to register an instance you created in "
                            "the console give --ssh 'ssh -p PORT root@HOST'")
        if r.spot and r.bid is None:
            raise UserError("--spot on vast.ai is an interruptible bid: give --bid USD/h (the "
                            "most you will pay; it cannot be raised later, VAST4)")
        choices = gpu_choices(r)
        if offer is not None and len(choices) > 1:
            raise UserError("--offer names one machine: GPU alternatives (--gpu A,B or a "
                            "task's accelerator list) apply only without it; drop one")

        def create(offer_id: int) -> Box:
            return vast_up(store, request.name, offer_id, r.image,
                           size_gb(r.disk) if r.disk else DISK_GB, bid=r.bid,
                           onstart=options.get("onstart") or "",
                           secrets=tuple(options.get("secrets") or ()),
                           image_cuda_version=options.get("image_cuda"),
                           wait_s=options.get("wait") or 900, on_wait=request.on_wait,
                           identity=options.get("identity"), data_dir=request.data_dir,
                           durable_dir=request.durable_dir)

        if offer is not None:
            return create(int(offer))
        # the next GPU is tried only when the one before has no offer or lost it before the
        # create (NoOffer, OfferGone): nothing was created for it, so never two
        return first_available(
            choices,
            lambda gpu: create(cheapest_offer(gpu, interruptible=r.bid is not None,
                                              max_price=r.bid, on_wait=request.on_wait)),
            request.on_wait,
            lambda tried: (f"no vast.ai offer for any GPU asked for ({tried}); nothing was "
                           "rented. Check the names as vast.ai spells them (RTX_4090, "
                           "H100_SXM) with `rgt offers`"))

    def gate(self, store: Store, box: Box, run: Any) -> dict[str, Any] | None:
        return watch_gate(store, box, run)

    def offers(self, query: OfferQuery) -> Offers:
        """`rgt offers --profile vastai`: the marketplace with the safe filters on."""
        return offer_table(query)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        return instance_status(store, box)

    def stops_meter(self, box: Box) -> bool:
        # a box registered by hand (`rgt up --ssh`) has no instance id for the API to act on
        return bool(box.extra.get("instance_id"))

    def release(self, store: Store, box: Box) -> Released:
        if not box.extra.get("instance_id"):  # registered by hand with `rgt up`: no API id
            return Released(
                "rgt has no vast.ai instance id for this box (it was registered by hand "
                "with `rgt up --ssh`, not rented by rgt): destroy it yourself (vastai "
                "destroy instance ID) — a stop keeps billing the disk (VAST1); it bills "
                "until then", still_billing=[f"vast.ai instance {box.name} until destroyed"])
        instance_id = _instance_id(box)
        poll_s = poll_interval()
        with client() as api:
            try:
                api.delete(f"/instances/{instance_id}/")
            except ApiError as err:
                if err.status != 404:
                    raise
            store.record("cloud-destroy", {"instance_id": instance_id}, box=box.name)
            deadline = time.monotonic() + self.confirm_s
            while (inst := find_instance(api, instance_id)) is not None:
                if time.monotonic() > deadline:
                    raise UserError(f"destroy was accepted but vast.ai still lists instance "
                                    f"{instance_id} ({inst.get('actual_status')}) after "
                                    f"{self.confirm_s:.0f} s; it may still bill — check the "
                                    f"console")
                time.sleep(poll_s)
        extra = {**store.box(box.name).extra, "destroyed_at": time.time()}
        store.update_box(box.name, extra=extra)
        store.record("cloud-destroyed", {"instance_id": instance_id}, box=box.name)
        return Released(f"destroyed vast.ai instance {instance_id} (confirmed: no longer "
                        "listed)")
