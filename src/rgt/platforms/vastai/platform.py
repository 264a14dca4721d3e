"""vast.ai: rent an SSH box on its marketplace (rgt.platforms.vastai.api: the client, offers,
the create's body, what each instance state means), on the rented skeleton (rgt.platforms.rented:
create once, record it, wait, register, release).

A marketplace of third-party hosts, and what this module does about it:

- `offers` searches with safe filters on by default: verified, rentable, a direct port and a
  reliability floor (VAST7, VAST8), and shows the bandwidth price next to $/h (VAST9).
- `vast_up` refuses an image whose CUDA is newer than the host's `cuda_max_good` (VAST5) before
  creating anything, creates with direct SSH and an onstart hook that relaunches unfinished runs
  after any container restart or preemption (tmux does not survive one), passes secrets as `env`
  at create and never in the image or onstart string (VAST11), waits through `loading` showing
  `status_msg` (VAST13) and reads the real SSH host:port from the API (VAST6).
- `instance_status` turns the instance's state machine into what it means: preempted shows as
  paused (VAST4), a stuck Scheduling as VAST3 with its fix, Offline as VAST7, stopped as VAST1.
  `rgt watch` asks it before probing over SSH (`gate`): a run on an instance that is not
  running reads "paused" with that cause, and resumes being probed once the instance runs.
- A create (PUT /asks/{id}/) is never retried blindly: after a lost answer rgt lists instances
  for the `label` it gave the create and adopts the new one, recorded in the store at once.
- `release` destroys: the only verb that stops the whole meter. `rgt down` calls it only after
  the Iron Law. A plain stop is never offered as a saving: its disk keeps billing.
"""

from __future__ import annotations

import json
import math
import time
from functools import partial
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import (
    OfferQuery,
    Offers,
    Request,
    Unavailable,
    first_available,
    gpu_choices,
    refuse_offer_filters,
    size_gb,
)
from rgt.platforms.http import ApiClient, ApiError, poll_interval
from rgt.platforms.rented import RentedPlatform, quiet, secret_env
from rgt.platforms.rentgroup import Created, Plan, ssh_target
from rgt.platforms.vastai import api as vast
from rgt.platforms.vastai.api import DISK_GB, MIN_RELIABILITY, SCHEDULING_STUCK_S, Notify, client
from rgt.store import Box, Store
from rgt.transport import SshTarget


class VastPlatform(RentedPlatform):
    """An SSH box rented on vast.ai's marketplace: `rent` creates on an offer (`vast_up`),
    `gate` tells `rgt watch` the instance's state before any SSH probe, `release` destroys
    (the only full meter stop) and confirms; the rest is the rented skeleton's."""

    name = "vastai"
    restart_hook = "vast.ai onstart"  # /root/onstart.sh relaunches unfinished runs
    # gpu/spot/bid pick the offer when --offer is not given (the cheapest safe one); disk
    # and image go into the create
    # and nodes: a group of offers on one host (rgt.platforms.rentgroup)
    supports = frozenset({"gpu", "disk", "image", "spot", "bid", "nodes"})
    rent_options = frozenset({"offer", "onstart", "secrets", "image_cuda", "wait",
                              "keep_partial"})
    confirm_s: float = 120
    fixed_login = "vast.ai instances log in as root on the port the API reports (VAST6)"
    service, thing, kill, name_word = "vast.ai", "instance", "destroy", "labelled"
    console = "the console (https://cloud.vast.ai/instances/)"
    kill_by_hand = "(vastai destroy instance ID)"
    kill_trap = "a stop keeps billing the disk (VAST1)"

    def client(self) -> ApiClient:
        return client()

    def find(self, api: ApiClient, instance_id: str) -> dict[str, Any] | None:
        return vast.find_instance(api, instance_id)

    def named(self, api: ApiClient, name: str) -> list[dict[str, Any]]:
        return vast.labelled(api, name)

    def destroy(self, api: ApiClient, instance_id: str) -> None:
        try:
            api.delete(f"/instances/{int(instance_id)}/")
        except ApiError as err:
            if err.status != 404:
                raise

    def status_of(self, inst: dict[str, Any]) -> str:
        return str(inst.get("actual_status"))

    def released_line(self, instance_id: str, polls: int) -> str:
        return f"destroyed vast.ai instance {instance_id} (confirmed: no longer listed)"

    def booted(self, inst: dict[str, Any] | None, instance_id: str) -> bool:
        if inst is None:
            raise UserError(f"vast.ai instance {instance_id} disappeared while starting (the "
                            f"host may have dropped it); pick another offer")
        if (inst.get("actual_status") or "created") == "running" and vast.has_ssh(inst):
            return True
        if inst.get("actual_status") == "offline":
            raise UserError(f"vast.ai instance {instance_id}'s host went offline while starting "
                            f"(VAST7); destroy it (`rgt cloud-status` shows it) and pick a "
                            f"verified, reliable offer")
        return False

    def booting_line(self, inst: dict[str, Any], instance_id: str) -> str:
        msg = inst.get("status_msg") or ""
        return (f"instance {instance_id}: {inst.get('actual_status') or 'created'}"
                + (f" — {msg}" if msg else ""))

    def still_booting(self, inst: dict[str, Any], instance_id: str, wait_s: float) -> str:
        return (f"vast.ai instance {instance_id} is still {inst.get('actual_status') or 'created'}"
                f" after {wait_s:.0f} s (last message: {inst.get('status_msg') or 'none'}) and is "
                f"billing its disk. Read `vastai show logs {instance_id}` for image-pull "
                f"progress; if stuck, destroy it and re-create on a faster offer or with a "
                f"slimmer image (VAST13)")

    def rent(self, store: Store, request: Request) -> Box:
        """`vast_up` on --offer ID, or on the cheapest safe offer for --gpu MODEL:COUNT."""
        r, options = request.resources, request.options
        self.refuse_before_renting(request)
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
        disk_gb = size_gb(r.disk) if r.disk else DISK_GB

        def create(offer_id: int) -> Box:
            return vast_up(store, request.name, offer_id, r.image, disk_gb, bid=r.bid,
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
        """What `rgt watch` shows while the instance cannot run the job; None when it can.

        A preempted, scheduling, loading, stopped or offline instance has no processes to
        probe: the run reads "paused" with the instance's state, gotcha and fix as its cause,
        and is never stored as ended. Once the instance runs again the onstart hook relaunches
        the run and the usual SSH probe takes over. A destroyed instance took the run's disk
        with it: "vanished"."""
        return self.gate_on(store, box, run)


    # a group (`--nodes N`, rgt.platforms.rentgroup): N offers on one host --------------------

    def group_plan(self, api: ApiClient, store: Store, request: Request) -> Plan:
        """The cheapest host with N safe offers for --gpu: a host is one provider's machines,
        in one place (vast.ai's search has no data-centre filter; the host is the closest)."""
        r, options = request.resources, request.options
        count = r.nodes
        if options.get("offer") is not None:
            raise UserError("--offer names one machine: a group of N takes N offers on one "
                            "vast.ai host, picked for --gpu MODEL:COUNT; drop --offer")
        choices = gpu_choices(r)
        if not r.image or not r.gpu or len(choices) > 1:
            raise UserError("to rent a group on vast.ai give one --gpu MODEL:COUNT and --image "
                            "IMAGE (every node the same GPU)")
        if r.spot and r.bid is None:
            raise UserError("--spot on vast.ai is an interruptible bid: give --bid USD/h (the "
                            "most you will pay; it cannot be raised later, VAST4)")
        disk_gb = size_gb(r.disk) if r.disk else DISK_GB
        refuse_disk_and_bid(disk_gb, r.bid)
        env = secret_env(tuple(options.get("secrets") or ()), "vast.ai instance")
        vast.refuse_secrets_in_onstart(options.get("onstart") or "", env)
        data_dir = request.data_dir or "/workspace"
        gpu, _, per_node = choices[0].partition(":")
        found = vast.offers(gpu, r.bid, num_gpus=int(per_node or 1),
                            interruptible=r.bid is not None, limit=64)
        hosts: dict[int, list[vast.Offer]] = {}
        for o in found:
            if o.host_id is not None:
                hosts.setdefault(o.host_id, []).append(o)
        fits = sorted((sum(o.usd_per_hour for o in offers[:count]), host)
                      for host, offers in hosts.items() if len(offers) >= count)
        if not fits:
            raise UserError(f"no vast.ai host has {count} verified, reliable offers with direct "
                            f"SSH for --gpu {choices[0]}; nothing was rented (a group's nodes "
                            "are taken from one host, so they sit in one place)")
        chosen = hosts[fits[0][1]][:count]
        request.on_wait(f"host {fits[0][1]} ({chosen[0].location}) has {count} offers for "
                        f"{choices[0]}: {', '.join(str(o.id) for o in chosen)}")
        return Plan(wait_s=options.get("wait") or 900, identity=options.get("identity"),
                    user="root", data_dir=data_dir,
                    durable_dir=request.durable_dir or data_dir,
                    extra={"image": str(r.image), "disk_gb": disk_gb, "interruptible_bid": r.bid,
                           "notes": ["durable copies are off-box: pull results home before "
                                     "`rgt down` (destroy deletes every node's disk, VAST2)"]},
                    context={"offers": chosen, "disk_gb": disk_gb, "env": env,
                             "onstart": vast.onstart_script(data_dir,
                                                            options.get("onstart") or ""),
                             "image_cuda": options.get("image_cuda")})

    def create_node(self, api: ApiClient, plan: Plan, rank: int, name: str,
                    region: str | None, first: Created | None, before: set[Any],
                    on_wait: Notify) -> Created:
        ctx, image = plan.context, plan.extra["image"]
        bid = plan.extra["interruptible_bid"]
        offer = vast.get_offer(api, ctx["offers"][rank].id, ctx["disk_gb"])
        note = vast.check_cuda(image, offer, ctx["image_cuda"])  # VAST5, before it bills
        if note:
            on_wait(note)
        instance_id, adopted = create_on_offer(
            self, api, name, offer, image, ctx["disk_gb"], bid=bid, onstart=ctx["onstart"],
            env=ctx["env"], before=before, poll_s=poll_interval())
        return Created(rank, name, str(instance_id), offer.hourly_rate(ctx["disk_gb"], bid),
                       f"host {offer.host_id} ({offer.location})", adopted,
                       detail={"offer": offer.id, "image": image, "bid": bid})

    def node_target(self, row: dict[str, Any], plan: Plan) -> SshTarget:
        host, port, _ = vast.ssh_endpoint(row)
        return ssh_target(host, port, "root", plan.identity)

    def node_address(self, row: dict[str, Any]) -> str:
        # vast.ai gives no private network between instances: the public address
        return str(row.get("public_ipaddr") or vast.ssh_endpoint(row)[0]).strip()

    def node_rate(self, row: dict[str, Any]) -> float:
        return float(row.get("dph_total") or 0)

    def offers(self, query: OfferQuery) -> Offers:
        """`rgt offers --profile vastai`: the marketplace with the safe filters on."""
        return offer_table(query)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        return instance_status(store, box)


def vast_up(store: Store, name: str, offer_id: int, image: str, disk_gb: float, *,
            bid: float | None = None, onstart: str = "", secrets: tuple[str, ...] = (),
            image_cuda_version: float | None = None, wait_s: float = 900,
            poll_s: float | None = None, on_wait: Notify = quiet, identity: str | None = None,
            data_dir: str | None = None, durable_dir: str | None = None) -> Box:
    """Create an instance on `offer_id`, wait until SSH answers, register it as box `name`."""
    cloud = VastPlatform()
    cloud.refuse_taken_name(store, name)
    refuse_disk_and_bid(disk_gb, bid)
    poll_s = poll_interval() if poll_s is None else poll_s
    env = secret_env(secrets, "vast.ai instance")
    vast.refuse_secrets_in_onstart(onstart, env)
    data_dir = data_dir or "/workspace"
    with client() as api:
        offer = vast.get_offer(api, offer_id, disk_gb)
        note = vast.check_cuda(image, offer, image_cuda_version)  # VAST5, before anything bills
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
        before = cloud.present(api, name)
        created, adopted = create_on_offer(cloud, api, name, offer, image, disk_gb, bid=bid,
                                           onstart=vast.onstart_script(data_dir, onstart),
                                           env=env, before=before, poll_s=poll_s)
        instance_id = int(created)
        cloud.record_create(store, name, instance_id, adopted, offer=offer.id, image=image,
                            bid=bid)
        rate = offer.hourly_rate(disk_gb, bid)
        on_wait(f"created instance {instance_id} on offer {offer.id} (${rate:.3f}/h with "
                f"{disk_gb:g} GB disk); waiting for it")
        inst = cloud.wait_ready(api, str(instance_id), wait_s=wait_s, poll_s=poll_s,
                                on_wait=on_wait)
    host, port, kind = vast.ssh_endpoint(inst)
    return cloud.register_instance(
        store, name, instance_id, host=host, port=port, user="root", identity=identity,
        rate=rate, data_dir=data_dir,
        durable_dir=durable_dir or data_dir, on_wait=on_wait,
        extra={"offer_id": offer.id, "image": image, "disk_gb": disk_gb,
               "ssh": f"{kind} {host}:{port}", "interruptible_bid": bid,
               "bandwidth_usd_per_gb": {"up": offer.bandwidth_up_usd_per_gb,
                                        "down": offer.bandwidth_down_usd_per_gb},
               "notes": ["durable copies are off-box: pull results home before `rgt down` "
                         "(destroy deletes the disk, VAST2)"]})


def refuse_disk_and_bid(disk_gb: float, bid: float | None) -> None:
    """A disk vast.ai cannot grow later, and a bid that is no price, refused before any
    create."""
    if not (math.isfinite(disk_gb) and disk_gb >= 10):
        raise UserError(f"--disk {disk_gb:g}: give at least 10 GB, and it can never grow later: "
                        "over-provision for the image, caches and checkpoints (VAST10)")
    if bid is not None and not (math.isfinite(bid) and bid > 0):
        raise UserError(f"--bid {bid:g}: give the most you will pay, in USD per hour (e.g. "
                        "--bid 0.2)")


def create_on_offer(cloud: VastPlatform, api: ApiClient, name: str, offer: vast.Offer,
                    image: str, disk_gb: float, *, bid: float | None, onstart: str,
                    env: dict[str, str], before: set[Any], poll_s: float) -> tuple[int, bool]:
    """One create on `offer`, labelled `name` (direct SSH, the onstart hook, secrets as env);
    a lost answer adopted by its label. Returns (instance id, adopted?)."""
    body: dict[str, Any] = {
        "client_id": "me", "image": image, "disk": disk_gb, "label": name,
        "runtype": "ssh_direct",  # direct TCP SSH (VAST8)
        "onstart": onstart, "env": env,
    }
    if bid is not None:
        body["price"] = bid
    vast.refuse_over_limits(body)
    try:
        created, adopted = cloud.create_once(
            api, name, before, poll_s=poll_s,
            create=partial(api.put, f"/asks/{offer.id}/", body, idempotent=False))
    except ApiError as err:  # a refusal made nothing; a taken offer is said as such
        if err.code == "no_such_ask":
            raise vast.OfferGone(f"vast.ai offer {offer.id} was rented by someone else "
                                 f"before rgt's create ({err}); nothing was created") from None
        raise
    if adopted:
        created = {"success": True, "new_contract": created["id"]}
    if not created or not created.get("success") or not created.get("new_contract"):
        raise UserError(f"vast.ai did not create an instance on offer {offer.id}: "
                        f"{api.scrub(json.dumps(created))[:200]}")
    return int(created["new_contract"]), adopted


def instance_status(store: Store, box: Box,
                    stuck_after_s: float = SCHEDULING_STUCK_S) -> dict[str, Any]:
    """vast_status for the box's instance, remembering since when it has been Scheduling."""
    instance_id = int(VastPlatform().instance_id(box))
    with client() as api:
        inst = vast.find_instance(api, instance_id)
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
    status = vast.vast_status(inst, scheduling_for_s=now - since if since else 0.0,
                         stuck_after_s=stuck_after_s)
    if inst is not None:
        status["ssh"] = None
        if vast.has_ssh(inst):
            host, port, kind = vast.ssh_endpoint(inst)
            status["ssh"] = f"{kind} {host}:{port}"  # as `vast_up` records it
    return {"instance_id": instance_id, **status}


def set_state(box: Box, state: str) -> str:
    """PUT /instances/{id}/ {state}: 'running' resumes, 'stopped' stops compute ONLY (VAST1)."""
    if state not in ("running", "stopped"):
        raise UserError("state must be running or stopped")
    instance_id = int(VastPlatform().instance_id(box))
    with client() as api:
        api.put(f"/instances/{instance_id}/", {"state": state})
    if state == "stopped":
        return (f"stopped vast.ai instance {instance_id}: compute billing halts but its disk KEEPS "
                f"BILLING until destroyed (VAST1) — this is not a way to save money; to stop the "
                f"meter, pull and verify, then `rgt down {box.name}`")
    return (f"asked vast.ai to start instance {instance_id}; it waits for its own GPU and can sit "
            f"in Scheduling (VAST3) — check `rgt cloud-status {box.name}`")


# offers ------------------------------------------------------------------------------------

class NoOffer(Unavailable):
    """No offer matches the GPU asked for (with the safe filters on): nothing was rented."""


def cheapest_offer(gpu: str, *, interruptible: bool, max_price: float | None,
                   on_wait: Notify = quiet) -> int:
    """The offer `rgt up --gpu MODEL:COUNT` rents: the cheapest with the safe filters on."""
    name, _, count = gpu.partition(":")
    found = vast.offers(name, max_price, num_gpus=int(count or 1), interruptible=interruptible,
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
    rows = vast.offers(gpu, query.max_price, num_gpus=count or 1, min_reliability=reliability,
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
