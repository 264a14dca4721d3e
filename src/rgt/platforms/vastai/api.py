"""vast.ai's control plane: its REST API, its offers, and what an instance's state means.

Docs: https://docs.vast.ai/api-reference (base https://console.vast.ai/api/v0, Authorization:
Bearer KEY): search offers (POST /bundles/ with the query as the body, as the docs and the
official `vastai` 1.9.1 client's `search offers` send it; the older `GET /bundles/?q=` is legacy),
create instance (PUT /asks/{offer_id}/), show
instances (GET /instances/ — actual_status, intended_status, cur_state, status_msg), manage
instance (PUT /instances/{id}/ with state), destroy instance (DELETE /instances/{id}/);
https://vast.ai/article/Rental-Types (bids); docs.vast.ai reference/billing.

- Offers are searched with safe filters on by default: verified, rentable, a direct port and a
  reliability floor (VAST7, VAST8), and shown with the bandwidth price next to $/h (VAST9).
- The rate rgt records is what the instance bills per hour: its compute (the offer's `dph_base`,
  or the bid) plus the disk it was created with (`storage_cost` $/GB/month × disk GB / 730 h):
  a stopped instance keeps billing that disk part.
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

The key is `VAST_API_KEY`, read from the environment by name (never argv, never printed).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import Unavailable
from rgt.platforms.http import ApiClient, ApiError, RatePolicy

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
    host_id: int | None = None  # the provider: its machines sit together (a group's nodes)

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
            compute_usd_per_hour=_compute_price(o),
            host_id=int(o["host_id"]) if isinstance(o.get("host_id"), int) else None)

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


def refuse_secrets_in_onstart(onstart: str, secrets: dict[str, str]) -> None:
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


def refuse_over_limits(body: dict[str, Any]) -> None:
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


def labelled(api: ApiClient, label: str) -> list[dict[str, Any]]:
    return [i for i in list_instances(api) if i.get("label") == label]



def ssh_endpoint(inst: dict[str, Any]) -> tuple[str, int, str]:
    """(host, port, 'direct'|'proxy') as the API reports them now (VAST6: never assume 22)."""
    mapped = (inst.get("ports") or {}).get("22/tcp") or []
    if inst.get("public_ipaddr") and mapped:
        return str(inst["public_ipaddr"]).strip(), int(mapped[0]["HostPort"]), "direct"
    if inst.get("ssh_host") and inst.get("ssh_port"):
        return str(inst["ssh_host"]), int(inst["ssh_port"]), "proxy"
    raise UserError("vast.ai reports no SSH endpoint for this instance yet")


def has_ssh(inst: dict[str, Any]) -> bool:
    try:
        ssh_endpoint(inst)
    except UserError:
        return False
    return True


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
