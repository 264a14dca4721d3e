"""RunPod Pods: rent through RunPod's REST API v2 (rgt.platforms.runpod.api: the client, the
catalog, the create's body, what each pod status bills), reach over full SSH, on the rented
skeleton (rgt.platforms.rented: create once, record it, wait, register, release).

What rgt does about RunPod's traps (the runpod profile's RP gotchas):

- Disks (RP2, RP3, RP4): a pod has a container disk (/, wiped on every stop or restart), a
  volume disk (/workspace, kept by a stop, deleted by terminate, billed twice the running rate
  while stopped) or, in its place, a network volume (outlives terminate, bills on its own).
  rgt puts the run dirs and checkpoints on /workspace, never on the container disk; the `down`
  panel lists those tiers from the profile; `stop` says what keeps billing and `rgt ls` shows
  it (box.extra["still_billing"]).
- A network volume attaches only at creation and only in its own data centre (RP7): rgt looks
  it up first, refuses a data centre that differs, and pins the pod to the volume's.
- A stopped pod can start again with zero GPUs (RP1): after every start rgt compares the GPUs
  the running pod really has (`runtime.gpus`) with the count it asked for; `rgt watch` does
  the same before probing (`gate`), so a run on a zero-GPU pod reads "paused" with RP1 and the
  advice to pull and re-rent, never "running".
- Every start or restart publishes 22/tcp on a new port, and Community Cloud IPs move (RP6):
  the box's connection is re-read from the pod's `ssh.direct` whenever rgt asks the API.
- Terminate (DELETE) answers 204 while the pod still exists (RP14): `release` polls GET
  /v2/pods/{id} until the API answers 404 (or TERMINATED) and only then calls it gone.
- A create is never retried blindly: after a lost answer rgt lists pods by the name it gave
  the create and adopts the new one, recorded in the store at once (it bills from there).
- Only full SSH on the pod's public IP moves files; the proxied ssh.runpod.io login is a shell
  only (RP6), so rgt never uses it. `startSsh` installs the account's registered keys only:
  rgt checks the key it will log in with is among them before renting anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import (
    Launched,
    OfferQuery,
    Offers,
    Request,
    Teardown,
    Unavailable,
    first_available,
    gpu_choices,
    refuse_offer_filters,
    size_gb,
)
from rgt.platforms.http import ApiClient, poll_interval
from rgt.platforms.rented import RentedPlatform, quiet, secret_env
from rgt.platforms.rentgroup import Created, Plan, ssh_target
from rgt.platforms.runpod import api as rp
from rgt.remote.layout import Layout
from rgt.spec import JobSpec
from rgt.store import Box, Run, Store
from rgt.transport import SshTarget, Transport

Notify = Callable[[str], None]
CONTAINER_DISK_GB = 20   # the image, pip and HF caches go elsewhere (RP11: caches → /workspace)
VOLUME_DISK_GB = 50


class RunpodPlatform(RentedPlatform):
    """A pod rented through RunPod's API: `rent` creates it (`runpod_up`), `gate` tells
    `rgt watch` the pod's state (stopped, zero GPUs, gone) before any SSH probe, `release`
    terminates and polls until the pod is gone (RP14); the rest is the rented skeleton's."""

    name = "runpod"
    # and nodes: N pods in one data centre (rgt.platforms.rentgroup)
    supports = frozenset({"gpu", "disk", "image", "region", "nodes"})
    rent_options = frozenset({"volume", "cloud", "container_disk", "secrets", "wait",
                              "keep_partial"})
    service, thing, kill = "RunPod", "pod", "terminate"
    console = f"the console ({rp.CONSOLE})"
    kill_trap = "a stop keeps billing its volume disk at twice the rate (RP4)"
    fixed_login = "RunPod pods log in as the user and port the API reports (RP6)"
    release_gotcha = " (RP14)"

    def client(self) -> ApiClient:
        return rp.client()

    def find(self, api: ApiClient, instance_id: str) -> dict[str, Any] | None:
        return rp.get_pod(api, instance_id)

    def named(self, api: ApiClient, name: str) -> list[dict[str, Any]]:
        return rp.named_pods(api, name)

    def destroy(self, api: ApiClient, instance_id: str) -> None:
        if rp.get_pod(api, instance_id) is not None:
            try:
                api.delete(f"/v2/pods/{instance_id}")
            except rp.ApiError as err:
                if err.status != 404:
                    raise

    def released(self, inst: dict[str, Any], instance_id: str) -> bool:
        return inst.get("status") == "TERMINATED"

    def still_billing(self, api: ApiClient, box: Box) -> list[str]:
        """A network volume outlives every pod and bills on its own (RP3, RP7)."""
        vol = box.extra.get("network_volume")
        if not vol:
            return []
        try:
            current = api.get(f"/v2/network-volumes/{vol['id']}")
        except rp.ApiError as err:
            if err.status != 404:
                raise
            current = None  # already deleted: nothing bills
        return [rp.volume_billing_line(current)] if current else []

    def released_line(self, instance_id: str, polls: int) -> str:
        return (f"terminated RunPod pod {instance_id} (confirmed gone after {polls} poll(s): "
                "the API no longer has it, RP14)")

    def booted(self, inst: dict[str, Any] | None, instance_id: str) -> bool:
        """Running with every GPU it asked for, and publishing full SSH."""
        state = rp.pod_state(inst)
        if state["state"] == "running" and rp.ssh_direct(inst or {}):
            return True
        if state["state"] in ("zero-gpu", "fewer-gpus"):
            raise UserError(f"RunPod pod {instance_id} runs but with {state['gpus_seen']} of its "
                            f"{state['gpus_asked']} GPU(s) (RP1), and it bills: "
                            f"{state['advice']}")
        if state["state"] in ("gone", "error", "stopped"):
            raise UserError(f"RunPod pod {instance_id} went {state['status']} while starting: "
                            f"{state['advice']}")
        return False

    def refuse_before_renting(self, request: Request) -> None:
        # before the shared refusals: their "cannot honour resources.spot" would say less
        if request.resources.spot or request.resources.bid:
            raise UserError("RunPod's REST API v2 has no interruptible (spot) pods or bids: "
                            "rgt rents on-demand pods only; drop --spot/--bid")
        super().refuse_before_renting(request)

    def rent(self, store: Store, request: Request) -> Box:
        """`runpod_up` as `rgt up --profile runpod --gpu TYPE:COUNT --image IMG` asks."""
        res, options = request.resources, request.options
        self.refuse_before_renting(request)
        if not res.gpu or not res.image:
            raise UserError(f"to rent on RunPod give --gpu TYPE:COUNT and --image IMAGE (e.g. "
                            f"`rgt up {request.name} --profile runpod --gpu RTX4090:1 --image "
                            f"runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404`); to register a "
                            f"pod you rented in the console give --ssh 'ssh -p PORT root@IP'")
        volume_gb = max(1, round(size_gb(res.disk))) if res.disk else VOLUME_DISK_GB
        return runpod_up(
            store, request.name, gpu_choices(res), res.image,
            cloud=str(options.get("cloud", "SECURE")),
            volume=options.get("volume"), data_centre=res.region,
            container_disk_gb=int(options.get("container_disk", CONTAINER_DISK_GB)),
            volume_gb=volume_gb, secrets=tuple(options.get("secrets", ())),
            identity=options.get("identity"),
            boot_wait_s=float(options.get("wait", 900)), on_wait=request.on_wait,
            data_dir=request.data_dir, durable_dir=request.durable_dir)


    # a group (`--nodes N`, rgt.platforms.rentgroup): N pods in one data centre ---------------
    # (RunPod's REST v2 and the SDK's GraphQL documents have no multi-node cluster to create:
    # N pods, the first one's data centre pinned for the rest)

    def group_plan(self, api: ApiClient, store: Store, request: Request) -> Plan:
        res, options = request.resources, request.options
        choices = gpu_choices(res)
        if not res.gpu or not res.image or len(choices) > 1:
            raise UserError(f"to rent a group on RunPod give one --gpu TYPE:COUNT and --image "
                            f"IMAGE (every pod the same GPU), e.g. `rgt up {request.name} "
                            f"--profile runpod --gpu H100:8 --image IMG --nodes 2`")
        volume_gb = max(1, round(size_gb(res.disk))) if res.disk else VOLUME_DISK_GB
        cloud = refuse_cloud_and_disk(str(options.get("cloud", "SECURE")), volume_gb)
        env = secret_env(tuple(options.get("secrets", ())), "pod")
        gpu_name, count = rp.parse_gpu(choices[0])
        vol, where = volume_and_place(api, options.get("volume"), res.region)
        chosen = rp.placeable(rp.catalog(api, count=count, cloud=cloud), gpu_name, count, cloud,
                              where, vol)
        rp.check_login_key(api, options.get("identity"))
        container = int(options.get("container_disk", CONTAINER_DISK_GB))
        extra: dict[str, Any] = {"gpu": chosen.id, "gpu_count": count, "cloud": cloud,
                                 "container_disk_gb": container}
        if vol:  # one network volume every pod mounts: the group's shared checkpoint home
            extra["network_volume"] = {k: vol.get(k) for k in ("id", "name", "dataCenter",
                                                                "size", "type")}
        else:
            extra["volume_disk_gb"] = volume_gb
            extra["notes"] = ["no network volume: each pod's /workspace is its own volume disk, "
                              "deleted by terminate (RP3); pull results home before `rgt down`"]
        return Plan(wait_s=float(options.get("wait", 900)), identity=options.get("identity"),
                    data_dir=request.data_dir, durable_dir=request.durable_dir, extra=extra,
                    context={"gpu": chosen, "count": count, "cloud": cloud, "vol": vol,
                             "where": where, "image": res.image, "env": env,
                             "container": container, "volume_gb": volume_gb})

    def create_node(self, api: ApiClient, plan: Plan, rank: int, name: str,
                    region: str | None, first: Created | None, before: set[Any],
                    on_wait: Notify) -> Created:
        ctx = plan.context
        body = rp.create_body(name, ctx["gpu"], ctx["count"], ctx["image"], cloud=ctx["cloud"],
                              container_disk_gb=ctx["container"], volume_gb=ctx["volume_gb"],
                              volume=ctx["vol"], data_centre=region or ctx["where"],
                              env=ctx["env"])
        pod, adopted = self.create_once(api, name, before, poll_s=poll_interval(),
                                        create=partial(api.post, "/v2/pods", body,
                                                       idempotent=False))
        pod = pod or {}
        rate = float(pod.get("cost") or ctx["gpu"].price.get(ctx["cloud"].lower(), 0)
                     * ctx["count"])
        return Created(rank, name, str(pod["id"]), rate, pod.get("dataCenterId"), adopted,
                       detail={"gpu": ctx["gpu"].id, "count": ctx["count"],
                               "cloud": ctx["cloud"], "volume": ctx["vol"] and ctx["vol"]["id"]})

    def node_target(self, row: dict[str, Any], plan: Plan) -> SshTarget:
        host, port, user = rp.ssh_direct(row)  # type: ignore[misc]  (wait_ready checked it)
        return ssh_target(host, port, user, plan.identity)

    def node_address(self, row: dict[str, Any]) -> str:
        # the pod's public IP: pods have no private network between them here
        return rp.ssh_direct(row)[0]  # type: ignore[index]

    def node_rate(self, row: dict[str, Any]) -> float:
        return float(row.get("cost") or 0)

    def node_region(self, row: dict[str, Any]) -> str | None:
        return row.get("dataCenterId")

    def offers(self, query: OfferQuery) -> Offers:
        """`rgt offers --profile runpod`: GPU types, their price and stock per data centre."""
        return gpu_offers(query)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        self._pod = pod_status(store, box)  # also records a moved SSH port (RP6)
        return self._pod

    def gate(self, store: Store, box: Box, run: Any) -> dict[str, Any] | None:
        """While the pod cannot run the job (stopped, booting, error) the run reads "paused"
        with the pod's state as its cause; a pod that is gone took /workspace with it:
        "vanished". None (probe as usual) when the pod runs, with or without its GPUs: a pod
        that came back with zero GPUs (RP1) answers SSH, and `state` adds the cause."""
        self._pod: dict[str, Any] | None = None  # read by `state` (RP1, RP6)
        return self.gate_on(store, box, run, runs=("running", "zero-gpu", "fewer-gpus"))

    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]:
        """The on-box probe, and what the pod says beside it: after a restart with fewer GPUs
        than it asked for (RP1) that comes first, with what to do."""
        summary = super().state(store, box, run, transport)
        status = getattr(self, "_pod", None)
        if status and status["state"] in ("zero-gpu", "fewer-gpus"):
            summary["causes"].insert(0, f"RunPod pod {status['instance_id']} restarted with "
                                        f"{status['gpus_seen']} of its {status['gpus_asked']} "
                                        f"GPU(s) (RP1); a restart also kills every job on it "
                                        f"and wipes the container disk (RP2)")
            summary["advice"] = status["advice"]
        if status and status.get("moved"):
            summary["causes"].append(status["moved"])
        return summary

    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched:
        """Refuse to start (or resume) a run on a pod that came back without its GPUs (RP1):
        it would train on the CPU, billing GPU rates."""
        pod_id = box.extra.get("instance_id")
        if pod_id:
            with rp.client() as api:
                state = rp.pod_state(rp.get_pod(api, str(pod_id)))
            if state["state"] in ("zero-gpu", "fewer-gpus"):
                raise UserError(f"RunPod pod {pod_id} has {state['gpus_seen']} of its "
                                f"{state['gpus_asked']} GPU(s) since its last start (RP1): "
                                f"nothing was started. Rent a new pod (`rgt up NEW --profile "
                                f"runpod …`) and `rgt resume {box.name} RUN --on NEW`; then "
                                f"`rgt down {box.name}`")
        return super().launch(transport, box, spec, layout, dependency=dependency)

    def teardown(self, store: Store, box: Box) -> Teardown:
        """`rgt down`'s panel: the profile's tiers, and for a rented pod the notes below."""
        return Teardown(notes=self.teardown_notes(store, box))

    def teardown_notes(self, store: Store, box: Box) -> list[str]:
        """What `rgt down`'s panel adds for THIS pod to the profile's tiers: which disk
        /workspace is here, and why a stop is no cheaper way out (RP2, RP3, RP4, RP7)."""
        if not box.extra.get("instance_id"):
            return []
        container = box.extra.get("container_disk_gb") or CONTAINER_DISK_GB
        volume_gb = _volume_gb(box)
        vol = box.extra.get("network_volume")
        lines = [f"terminate deletes the container disk (/, {container} GB) — a stop or "
                 f"restart wipes it too (RP2)"]
        if vol:
            lines.append(f"/workspace is network volume {vol.get('name')} ({vol.get('id')}, "
                         f"{vol.get('dataCenter')}): it survives terminate and bills on its "
                         f"own: {rp.volume_billing_line(vol)}")
        else:
            lines.append(f"terminate deletes /workspace for good: it is this pod's {volume_gb:g} "
                         f"GB volume disk, not a network volume (RP3)")
        kept = ("the network volume (billing as before)" if vol else
                f"/workspace but bills its {volume_gb:g} GB volume disk at "
                f"${rp.VOLUME_DISK['stopped']:.2f}/GB/month "
                f"(${volume_gb * rp.VOLUME_DISK['stopped']:.2f}/month, twice the running rate, "
                f"RP4) until terminated")
        lines.append(f"a stop instead keeps {kept}, wipes the container disk (RP2), has the pod "
                     f"purged ~{rp.PURGE_AFTER_DAYS} days later, and may come back with zero "
                     f"GPUs (RP1): it does not stop the meter")
        try:
            status = pod_status(store, box)
        except UserError as err:
            return [*lines, f"RunPod could not be asked about pod {box.extra['instance_id']} "
                            f"({err})"]
        if status["state"] != "running":
            lines.append(f"pod {status['instance_id']} is {status['state']} now: "
                         f"{status['advice']}")
        return lines

def refuse_cloud_and_disk(cloud: str, volume_gb: int) -> str:
    """The RunPod cloud asked for (upper case, as the API spells it), and a volume disk RunPod
    can make: refused before any request."""
    cloud = cloud.upper()
    if cloud not in ("SECURE", "COMMUNITY"):
        raise UserError(f"--cloud {cloud.lower()}: RunPod has secure and community clouds")
    if volume_gb < 10:
        raise UserError(f"--disk {volume_gb}: RunPod's volume disk is at least 10 GB")
    return cloud


def volume_and_place(api: ApiClient, volume: str | None, data_centre: str | None
                     ) -> tuple[dict[str, Any] | None, str | None]:
    """The network volume named `volume` and the data centre the pod must go to: the volume's,
    which must be the one asked for (RP7). Returns (volume or None, data centre or None)."""
    vol = None
    if volume:
        vol = rp.find_volume(api, volume)
        if data_centre and data_centre != vol["dataCenter"]:
            raise UserError(
                f"network volume {vol['name']} lives in {vol['dataCenter']} but you asked "
                f"for {data_centre}: a pod mounts a network volume only in the volume's own "
                f"data centre, and only at creation (RP7). Use --region "
                f"{vol['dataCenter']}, or rent without the volume")
    return vol, vol["dataCenter"] if vol else data_centre


def runpod_up(store: Store, name: str, gpu: str | Sequence[str], image: str, *,
              cloud: str = "SECURE",
              volume: str | None = None, data_centre: str | None = None,
              container_disk_gb: int = CONTAINER_DISK_GB, volume_gb: int = VOLUME_DISK_GB,
              secrets: tuple[str, ...] = (), identity: str | None = None,
              boot_wait_s: float = 900, poll_s: float | None = None, on_wait: Notify = quiet,
              data_dir: str | None = None, durable_dir: str | None = None) -> Box:
    """Create a pod, wait until it runs with its GPUs and answers SSH, register it as `name`.

    `gpu` may be several choices, first preferred: one RunPod cannot place (no stock, too many
    GPUs for its pods, a create refused for want of machines) is skipped with why, and the
    next is tried. One pod is made at most: a create whose answer was lost is adopted."""
    pods = RunpodPlatform()
    pods.refuse_taken_name(store, name)
    cloud = refuse_cloud_and_disk(cloud, volume_gb)
    env = secret_env(secrets, "pod")
    choices = [gpu] if isinstance(gpu, str) else list(gpu)
    asked = {choice: rp.parse_gpu(choice) for choice in choices}  # a bad spelling: at once
    poll_s = poll_interval() if poll_s is None else poll_s
    with rp.client() as api:
        vol, where = volume_and_place(api, volume, data_centre)
        catalogs: dict[int, list[rp.GpuType]] = {}
        before: set[Any] | None = None  # pods already named so: never adopted as ours

        def create(choice: str) -> tuple[dict[str, Any], bool, rp.GpuType, int]:
            nonlocal before
            gpu_name, count = asked[choice]
            if count not in catalogs:
                catalogs[count] = rp.catalog(api, count=count, cloud=cloud)
            chosen = rp.placeable(catalogs[count], gpu_name, count, cloud, where, vol)
            if before is None:  # once, before the first create
                rp.check_login_key(api, identity)
                before = pods.present(api, name)
            body = rp.create_body(name, chosen, count, image, cloud=cloud,
                                  container_disk_gb=container_disk_gb, volume_gb=volume_gb,
                                  volume=vol, data_centre=data_centre, env=env)
            try:
                pod, adopted = pods.create_once(
                    api, name, before, poll_s=poll_s,
                    create=partial(api.post, "/v2/pods", body, idempotent=False))
            except rp.ApiError as err:  # a refusal made nothing: another GPU may be placed
                if err.status != 400 or len(choices) == 1:
                    raise
                raise Unavailable(str(err), why=f"RunPod could not place it ({err})") from None
            return pod, adopted, chosen, count

        pod, adopted, chosen, count = first_available(
            choices, create, on_wait,
            lambda tried: (f"RunPod has none of the GPUs asked for ({tried}); nothing was "
                           "created. `rgt offers --profile runpod` shows the stock now"))
        pod = pod or {}
        pod_id = str(pod["id"])
        rate = float(pod.get("cost") or chosen.price.get(cloud.lower(), 0) * count)
        pods.record_create(store, name, pod_id, adopted, gpu=chosen.id, count=count,
                           cloud=cloud, volume=vol and vol["id"])
        on_wait(f"created pod {pod_id} ({count}x {chosen.name}, ${rate:.2f}/h compute); "
                f"waiting for it to run")
        pod = pods.wait_ready(api, pod_id, wait_s=boot_wait_s, poll_s=poll_s, on_wait=on_wait)
    host, port, user = rp.ssh_direct(pod)  # type: ignore[misc]  (wait_ready checked it)
    extra: dict[str, Any] = {"gpu": chosen.id, "gpu_count": count, "cloud": cloud,
                             "data_centre": pod.get("dataCenterId"),
                             "container_disk_gb": container_disk_gb, "ssh": f"{host}:{port}"}
    if vol:
        extra["network_volume"] = {k: vol.get(k) for k in ("id", "name", "dataCenter", "size",
                                                            "type")}
    else:
        extra["volume_disk_gb"] = volume_gb
        extra["notes"] = ["no network volume: /workspace is the pod's volume disk, deleted "
                          "by terminate (RP3); pull results home before `rgt down`"]
    return pods.register_instance(store, name, pod_id, host=host, port=port, user=user,
                                  identity=identity, rate=rate, data_dir=data_dir,
                                  durable_dir=durable_dir, on_wait=on_wait, extra=extra)


def _volume_gb(box: Box) -> float:
    return float(box.extra.get("volume_disk_gb") or 0)


def pod_status(store: Store, box: Box) -> dict[str, Any]:
    """What RunPod says about the box's pod, and what it means; a moved SSH port (every start
    publishes a new one, RP6) is written back to the box so the next connection finds it."""
    pod_id = RunpodPlatform().instance_id(box)
    with rp.client() as api:
        pod = rp.get_pod(api, pod_id)
    status = {"instance_id": pod_id, **rp.pod_state(pod, volume_gb=_volume_gb(box))}
    endpoint = rp.ssh_direct(pod or {})
    if endpoint is not None:
        host, port, user = endpoint
        connection = dict(box.connection)
        if (connection.get("host"), connection.get("port")) != (host, port):
            old = f"{connection.get('host')}:{connection.get('port')}"
            connection.update(host=host, port=port, user=connection.get("user") or user)
            store.update_box(box.name, connection=connection,
                             extra={**box.extra, "ssh": f"{host}:{port}"})
            store.record("ssh-moved", {"from": old, "to": f"{host}:{port}"}, box=box.name)
            box.connection = connection
            status["moved"] = f"SSH moved from {old} to {host}:{port} (a new port on every "\
                              f"start, RP6)"
        status["ssh"] = f"{host}:{port}"
    return status


def set_running(store: Store, box: Box, running: bool, *, wait_s: float = 900,
                on_wait: Notify = quiet) -> str:
    """`stop` (reversible, NOT a meter stop: the volume disk bills double, RP4) or `start`
    (then the GPUs are counted, RP1, and the new SSH port recorded, RP6)."""
    pod_id = RunpodPlatform().instance_id(box)
    with rp.client() as api:
        api.post(f"/v2/pods/{pod_id}/action", {"action": "start" if running else "stop"})
        if not running:
            line = rp.stopped_disk_line(pod_id, _volume_gb(box))
            billing = [line] if _volume_gb(box) else []
            if box.extra.get("network_volume"):
                billing.append(rp.volume_billing_line(box.extra["network_volume"]))
            store.update_box(box.name, extra={**box.extra, "still_billing": billing,
                                               "stopped_at": time.time()})
            store.record("cloud-stop", {"instance_id": pod_id}, box=box.name)
            return (f"stopped RunPod pod {pod_id}: compute stops, but {line}. Jobs on it are "
                    f"dead; to stop the meter, pull and verify, then `rgt down {box.name}`")
        RunpodPlatform().wait_ready(api, pod_id, wait_s=wait_s, poll_s=poll_interval(),
                                    on_wait=on_wait)
    extra = {k: v for k, v in store.box(box.name).extra.items()
             if k not in ("still_billing", "stopped_at")}
    store.update_box(box.name, extra=extra)
    status = pod_status(store, store.box(box.name))
    store.record("cloud-start", {"instance_id": pod_id, "ssh": status.get("ssh")},
                 box=box.name)
    return (f"RunPod pod {pod_id} runs again with its {status['gpus_seen']} GPU(s) at "
            f"{status.get('ssh')}; the container disk was wiped and jobs died (RP2): "
            f"`rgt resume {box.name} RUN` relaunches a run from its checkpoints")


def gpu_offers(query: OfferQuery) -> Offers:
    """The catalog as `rgt offers` shows it: the GPU types fitting --gpu (all without it) that
    RunPod can place now for the count and cloud asked, cheapest first, with where."""
    opts = dict(query.options)
    refuse_offer_filters("runpod", {"cloud"}, opts)
    if query.spot:
        raise UserError("RunPod's REST API v2 has no interruptible (spot) pods: rgt rents "
                        "on-demand pods only; drop --interruptible")
    cloud = str(opts.get("cloud") or "SECURE").upper()
    if cloud not in ("SECURE", "COMMUNITY"):
        raise UserError(f"--cloud {cloud.lower()}: RunPod has secure and community clouds")
    model, asked = query.model_and_count()
    name, count = (model or "").strip(), asked or 1
    with rp.client() as api:
        types = rp.catalog(api, count=count, cloud=cloud)
    if name:
        types = [t for t in types if rp.named_like(t, name)]
    key = cloud.lower()
    rows = [t for t in types if t.stock and count <= t.max_count.get(key, 0)
            and (not query.region or t.stock.get(query.region, "NONE") != "NONE")
            and (query.max_price is None or t.price.get(key, 0) * count <= query.max_price)]
    rows.sort(key=lambda t: t.price.get(key, 0))
    rows = rows[:query.limit]
    what = f"{name or 'GPU'} pods of {count} GPU(s)"
    return Offers(
        title=f"RunPod {what}, {key} cloud (in stock now)",
        columns=["gpu type", "memory GB", "$/h", "stock by data centre"],
        rows=[[t.name, str(t.memory_gb), f"{t.price.get(key, 0) * count:.2f}",
               ", ".join(f"{dc} {level.lower()}" for dc, level in sorted(t.stock.items()))]
              for t in rows],
        records=[{"id": t.id, "name": t.name, "memory_gb": t.memory_gb, "count": count,
                  "cloud": key, "usd_per_hour": round(t.price.get(key, 0) * count, 4),
                  "stock": t.stock} for t in rows],
        empty=(f"RunPod has no {what} in stock on the {key} cloud"
               + (f" in {query.region}" if query.region else "")
               + (f" under ${query.max_price:g}/h" if query.max_price is not None else "")
               + "; try another --gpu, --cloud community, or drop the filters"),
        next="Next: rgt up NAME --profile runpod --gpu 'TYPE:COUNT' --image IMG "
             "[--volume V] (a network volume pins the data centre, RP7)")
