"""RunPod Pods: rent through RunPod's REST API v2, reach over full SSH, stop the meter by
terminate, confirmed by polling until the pod is gone.

The API itself, why v2, and what each pod status bills: rgt.platforms.runpod.api. Here, what
rgt does about RunPod's traps (the runpod profile's RP gotchas):

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

The key is `RUNPOD_API_KEY`, read from the environment by name (never argv, never printed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import (
    Launched,
    OfferQuery,
    Offers,
    Released,
    Request,
    Teardown,
    Unavailable,
    first_available,
    gpu_choices,
    refuse_offer_filters,
    refuse_unsupported,
)
from rgt.platforms.http import AmbiguousCreate, ApiClient, adopt_lost_create, poll_interval
from rgt.platforms.runpod import api as rp
from rgt.platforms.ssh import SshPlatform
from rgt.profiles import load_profile
from rgt.remote.layout import Layout
from rgt.remote.register import register_rented
from rgt.remote.summary import summarize
from rgt.spec import JobSpec
from rgt.store import TERMINAL, Box, Run, Store
from rgt.transport import SshTarget, Transport

Notify = Callable[[str], None]
MOUNT = "/workspace"
CONTAINER_DISK_GB = 20   # the image, pip and HF caches go elsewhere (RP11: caches → /workspace)
VOLUME_DISK_GB = 50
OPTIONS = ("volume", "cloud", "container_disk", "secrets", "identity", "wait")


def _quiet(_: str) -> None:
    pass


# renting ----------------------------------------------------------------------------------------

def check_login_key(api: ApiClient, identity: str | None) -> None:
    """`startSsh` gives the pod the account's registered keys and nothing else: with none the
    pod has no SSH at all, and a key rgt logs in with that is not among them is refused by
    the pod's sshd after the meter started. Both are said before anything is rented."""
    keys = {rp.key_body(k) for k in rp.registered_keys(api)}
    if not keys:
        raise UserError("your RunPod account has no SSH public key registered: a pod gets only "
                        "those, so rgt could not log in. Add yours in the console (Settings → "
                        "SSH Public Keys); nothing was created")
    if identity:
        pub = Path(identity).expanduser().with_name(Path(identity).name + ".pub")
        if pub.is_file() and rp.key_body(pub.read_text()) not in keys:
            raise UserError(f"{pub} is not among the SSH keys registered with RunPod, so the "
                            f"pod would refuse it: add it in the console (Settings → SSH "
                            f"Public Keys), or pass the --identity of a key that is; nothing "
                            f"was created")


def create_body(name: str, gpu: rp.GpuType, count: int, image: str, *, cloud: str,
                container_disk_gb: int, volume_gb: int, volume: dict[str, Any] | None,
                data_centre: str | None, env: dict[str, str]) -> dict[str, Any]:
    """POST /v2/pods: only fields CreatePodRequest names (v2 refuses any other by name)."""
    body: dict[str, Any] = {
        "name": name, "image": image, "gpu": {"id": gpu.id, "count": count},
        "cloud": cloud, "disk": container_disk_gb,
        "ports": ["22/tcp"],  # full SSH on the public IP: file transfer works (RP6)
        "startSsh": True,
    }
    if volume is not None:  # replaces the volume disk at /workspace and outlives terminate
        body["mounts"] = {"network": [{"volumeId": volume["id"], "path": MOUNT}]}
        body["dataCenterIds"] = [volume["dataCenter"]]  # RP7: the volume's data centre only
    else:
        body["mounts"] = {"persistent": {"size": volume_gb, "path": MOUNT}}
        if data_centre:
            body["dataCenterIds"] = [data_centre]
    if env:
        body["env"] = env
    return body


def runpod_up(store: Store, name: str, gpu: str | Sequence[str], image: str, *,
              cloud: str = "SECURE",
              volume: str | None = None, data_centre: str | None = None,
              container_disk_gb: int = CONTAINER_DISK_GB, volume_gb: int = VOLUME_DISK_GB,
              secrets: tuple[str, ...] = (), identity: str | None = None,
              boot_wait_s: float = 900, poll_s: float | None = None, on_wait: Notify = _quiet,
              data_dir: str | None = None, durable_dir: str | None = None) -> Box:
    """Create a pod, wait until it runs with its GPUs and answers SSH, register it as `name`.

    `gpu` may be several choices, first preferred: one RunPod cannot place (no stock, too many
    GPUs for its pods, a create refused for want of machines) is skipped with why, and the
    next is tried. One pod is made at most: a create whose answer was lost is adopted."""
    cloud = cloud.upper()
    if cloud not in ("SECURE", "COMMUNITY"):
        raise UserError(f"--cloud {cloud.lower()}: RunPod has secure and community clouds")
    if volume_gb < 10:
        raise UserError(f"--disk {volume_gb}: RunPod's volume disk is at least 10 GB")
    missing = [n for n in secrets if not os.environ.get(n)]
    if missing:
        raise UserError(f"secrets not set in this shell: {', '.join(missing)}; export them "
                        "(they go to the pod as env at create, never in argv)")
    choices = [gpu] if isinstance(gpu, str) else list(gpu)
    asked = {choice: rp.parse_gpu(choice) for choice in choices}  # a bad spelling: at once
    poll_s = poll_interval() if poll_s is None else poll_s
    with rp.client() as api:
        vol = None
        if volume:
            vol = rp.find_volume(api, volume)
            if data_centre and data_centre != vol["dataCenter"]:
                raise UserError(
                    f"network volume {vol['name']} lives in {vol['dataCenter']} but you asked "
                    f"for {data_centre}: a pod mounts a network volume only in the volume's own "
                    f"data centre, and only at creation (RP7). Use --region "
                    f"{vol['dataCenter']}, or rent without the volume")
        where = vol["dataCenter"] if vol else data_centre
        catalogs: dict[int, list[rp.GpuType]] = {}
        env = {n: os.environ[n] for n in secrets}
        before: set[Any] | None = None  # pods already named so: never adopted as ours

        def create(choice: str) -> tuple[dict[str, Any], bool, rp.GpuType, int]:
            nonlocal before
            gpu_name, count = asked[choice]
            if count not in catalogs:
                catalogs[count] = rp.catalog(api, count=count, cloud=cloud)
            chosen = _placeable(catalogs[count], gpu_name, count, cloud, where, vol)
            if before is None:  # once, before the first create
                check_login_key(api, identity)
                before = {p.get("id") for p in rp.named_pods(api, name)}
            body = create_body(name, chosen, count, image, cloud=cloud,
                               container_disk_gb=container_disk_gb, volume_gb=volume_gb,
                               volume=vol, data_centre=data_centre, env=env)
            try:
                return api.post("/v2/pods", body, idempotent=False) or {}, False, chosen, count
            except AmbiguousCreate as err:  # it may exist: adopt it, never create again
                return _adopt(api, name, before, err, poll_s=poll_s), True, chosen, count
            except rp.ApiError as err:  # a refusal made nothing: another GPU may be placed
                if err.status != 400 or len(choices) == 1:
                    raise
                raise Unavailable(str(err), why=f"RunPod could not place it ({err})") from None

        pod, adopted, chosen, count = first_available(
            choices, create, on_wait,
            lambda tried: (f"RunPod has none of the GPUs asked for ({tried}); nothing was "
                           "created. `rgt offers --profile runpod` shows the stock now"))
        pod_id = str(pod["id"])
        rate = float(pod.get("cost") or chosen.price.get(cloud.lower(), 0) * count)
        # In the store before anything else can fail: the pod bills from here.
        store.record("cloud-launch", {"platform": "runpod", "instance_id": pod_id,
                                      "gpu": chosen.id, "count": count, "cloud": cloud,
                                      "volume": vol and vol["id"], "adopted": adopted},
                     box=name)
        on_wait(f"created pod {pod_id} ({count}x {chosen.name}, ${rate:.2f}/h compute); "
                f"waiting for it to run")
        pod = wait_running(api, pod_id, wait_s=boot_wait_s, poll_s=poll_s, on_wait=on_wait)
    host, port, user = rp.ssh_direct(pod)  # type: ignore[misc]  (wait_running checked it)
    target = SshTarget(host=host, port=port, user=user,
                       identity=Path(identity).expanduser() if identity else None)
    box = register_rented(store, name, load_profile("runpod"), target,
                          instance=f"RunPod pod {pod_id}",
                          stop_hint=f"terminate it in the console ({rp.CONSOLE})", rate=rate,
                          data_dir=data_dir, durable_dir=durable_dir, on_retry=on_wait,
                          pause_s=min(3.0, poll_interval()))
    extra = {**box.extra, "platform": "runpod", "instance_id": pod_id, "gpu": chosen.id,
             "gpu_count": count, "cloud": cloud, "data_centre": pod.get("dataCenterId"),
             "container_disk_gb": container_disk_gb, "ssh": f"{host}:{port}"}
    if vol:
        extra["network_volume"] = {k: vol.get(k) for k in ("id", "name", "dataCenter", "size",
                                                            "type")}
    else:
        extra["volume_disk_gb"] = volume_gb
        extra["notes"] = ["no network volume: /workspace is the pod's volume disk, deleted "
                          "by terminate (RP3); pull results home before `rgt down`"]
    store.update_box(name, extra=extra)
    return store.box(name)


def _placeable(types: list[rp.GpuType], gpu_name: str, count: int, cloud: str,
               where: str | None, vol: dict[str, Any] | None) -> rp.GpuType:
    """The GPU type asked for, refused before anything is created when RunPod cannot place it
    as asked: no such type (Unavailable: another choice may be), more GPUs than one pod of it
    holds, or no stock for the count and cloud (in `where`, if pinned)."""
    try:
        chosen = rp.pick_gpu(types, gpu_name)
    except UserError as err:
        raise Unavailable(str(err), why=str(err).removesuffix("; nothing was created")
                          ) from None
    most = chosen.max_count.get(cloud.lower(), 0)
    if count > most:
        raise Unavailable(f"RunPod pods of {chosen.name} hold at most {most} GPUs on the "
                          f"{cloud.lower()} cloud, not {count}; nothing was created",
                          why=f"RunPod pods of {chosen.name} hold at most {most} GPUs on "
                              f"the {cloud.lower()} cloud, not {count}")
    if where and chosen.stock.get(where, "NONE") == "NONE":
        stocked = ", ".join(sorted(chosen.stock)) or "nowhere right now"
        why = (f"RunPod lists no {chosen.name} stock for {count} GPU(s) in {where} (it has "
               f"some in: {stocked})")
        raise Unavailable(f"{why}; nothing was created"
                          + (" — the network volume pins the data centre (RP7)" if vol else ""),
                          why=why)
    if not where and chosen.availability == "NONE" and not chosen.stock:
        why = (f"RunPod lists no {chosen.name} stock for {count} GPU(s) on the "
               f"{cloud.lower()} cloud in any data centre right now")
        raise Unavailable(f"{why}; nothing was created", why=why)
    return chosen


def _adopt(api: ApiClient, name: str, before: set[Any], err: Exception, *,
           poll_s: float) -> dict[str, Any]:
    """The pod a create with a lost answer made, found by its name; never a second create."""
    fresh = adopt_lost_create(lambda: rp.named_pods(api, name), before, poll_s=poll_s)
    if len(fresh) == 1:
        return fresh[0]
    if fresh:
        ids = ", ".join(str(p.get("id")) for p in fresh)
        raise UserError(f"the create's answer was lost ({err}) and RunPod now lists "
                        f"{len(fresh)} new pods named {name!r} ({ids}), ALL BILLING: terminate "
                        f"the extras in the console ({rp.CONSOLE})")
    raise UserError(f"the create's answer was lost ({err}) and no new pod named {name!r} is "
                    f"listed; rgt did not create again. Check the console ({rp.CONSOLE}) "
                    f"before retrying: one may still appear and bill")


def wait_running(api: ApiClient, pod_id: str, *, wait_s: float, poll_s: float,
                 on_wait: Notify = _quiet) -> dict[str, Any]:
    """Poll until the pod RUNS with every GPU it asked for and publishes full SSH."""
    deadline = time.monotonic() + wait_s
    last = ""
    while True:
        pod = rp.get_pod(api, pod_id)
        state = rp.pod_state(pod)
        if state["state"] == "running" and rp.ssh_direct(pod or {}):
            return pod  # type: ignore[return-value]
        if state["state"] in ("zero-gpu", "fewer-gpus"):
            raise UserError(f"RunPod pod {pod_id} runs but with {state['gpus_seen']} of its "
                            f"{state['gpus_asked']} GPU(s) (RP1), and it bills: "
                            f"{state['advice']}")
        if state["state"] in ("gone", "error", "stopped"):
            raise UserError(f"RunPod pod {pod_id} went {state['status']} while starting: "
                            f"{state['advice']}")
        if time.monotonic() > deadline:
            raise UserError(f"RunPod pod {pod_id} is still {state['status']} after "
                            f"{wait_s:.0f} s and IS BILLING: check {rp.CONSOLE}, and terminate "
                            f"it there if it never comes up")
        if state["status"] != last:
            on_wait(f"pod {pod_id}: {state['status']}")
            last = state["status"]
        time.sleep(poll_s)


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


# the pod's state, as the verbs need it ---------------------------------------------------------

def _pod_id(box: Box) -> str:
    pod_id = box.extra.get("instance_id")
    if not pod_id:
        raise UserError(f"box {box.name!r} has no RunPod pod id (registered by hand with "
                        "`rgt up --ssh`, not rented by rgt): manage it in the console")
    return str(pod_id)


def _volume_gb(box: Box) -> float:
    return float(box.extra.get("volume_disk_gb") or 0)


def pod_status(store: Store, box: Box) -> dict[str, Any]:
    """What RunPod says about the box's pod, and what it means; a moved SSH port (every start
    publishes a new one, RP6) is written back to the box so the next connection finds it."""
    pod_id = _pod_id(box)
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
                on_wait: Notify = _quiet) -> str:
    """`stop` (reversible, NOT a meter stop: the volume disk bills double, RP4) or `start`
    (then the GPUs are counted, RP1, and the new SSH port recorded, RP6)."""
    pod_id = _pod_id(box)
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
        wait_running(api, pod_id, wait_s=wait_s, poll_s=poll_interval(), on_wait=on_wait)
    extra = {k: v for k, v in store.box(box.name).extra.items()
             if k not in ("still_billing", "stopped_at")}
    store.update_box(box.name, extra=extra)
    status = pod_status(store, store.box(box.name))
    store.record("cloud-start", {"instance_id": pod_id, "ssh": status.get("ssh")},
                 box=box.name)
    return (f"RunPod pod {pod_id} runs again with its {status['gpus_seen']} GPU(s) at "
            f"{status.get('ssh')}; the container disk was wiped and jobs died (RP2): "
            f"`rgt resume {box.name} RUN` relaunches a run from its checkpoints")


# the platform ----------------------------------------------------------------------------------

class RunpodPlatform(SshPlatform):
    """A pod rented through RunPod's API: `provision` creates it (`runpod_up`), `gate` tells
    `rgt watch` the pod's state (stopped, zero GPUs, gone) before any SSH probe, `release`
    terminates and polls until the pod is gone (RP14); the rest is `SshPlatform`'s."""

    name = "runpod"
    supports = frozenset({"gpu", "disk", "image", "region"})
    confirm_s: float = 300
    rents = True  # without --ssh/--host `provision` creates a pod: it bills from there

    def provision(self, store: Store, request: Request) -> Box:
        res = request.resources
        options = {k: v for k, v in request.options.items() if v not in (None, False, (), [])}
        if request.target is not None:  # a pod rented in the console: register it as it is
            if options or any(getattr(res, f, None) for f in ("gpu", "image", "region")):
                raise UserError("--ssh/--host register a pod you already rented; renting "
                                "options (--gpu, --image, --volume …) create a new one: give "
                                "one or the other")
            return super().provision(store, request)
        if getattr(res, "spot", None) or getattr(res, "bid", None):
            raise UserError("RunPod's REST API v2 has no interruptible (spot) pods or bids: "
                            "rgt rents on-demand pods only; drop --spot/--bid")
        refuse_unsupported(self.profile, self.supports, res)
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UserError(f"--{unknown[0].replace('_', '-')} does not apply to RunPod")
        if not res.gpu or not getattr(res, "image", None):
            raise UserError(f"to rent on RunPod give --gpu TYPE:COUNT and --image IMAGE (e.g. "
                            f"`rgt up {request.name} --profile runpod --gpu RTX4090:1 --image "
                            f"runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404`); to register a "
                            f"pod you rented in the console give --ssh 'ssh -p PORT root@IP'")
        volume_gb = _gigabytes(res.disk) if res.disk else VOLUME_DISK_GB
        return runpod_up(
            store, request.name, gpu_choices(res), res.image,
            cloud=str(options.get("cloud", "SECURE")),
            volume=options.get("volume"), data_centre=getattr(res, "region", None),
            container_disk_gb=int(options.get("container_disk", CONTAINER_DISK_GB)),
            volume_gb=volume_gb, secrets=tuple(options.get("secrets", ())),
            identity=options.get("identity"),
            boot_wait_s=float(options.get("wait", 900)), on_wait=request.on_wait,
            data_dir=request.data_dir, durable_dir=request.durable_dir)

    def offers(self, query: OfferQuery) -> Offers:
        """`rgt offers --profile runpod`: GPU types, their price and stock per data centre."""
        return gpu_offers(query)

    def cloud_status(self, store: Store, box: Box) -> dict[str, Any]:
        return pod_status(store, box)  # also records a moved SSH port (RP6)

    def gate(self, store: Store, box: Box, run: Any) -> dict[str, Any] | None:
        """While the pod cannot run the job (stopped, booting, error) the run reads "paused"
        with the pod's state as its cause; a pod that is gone took /workspace with it:
        "vanished". None (probe as usual) when the pod runs, with or without its GPUs: a pod
        that came back with zero GPUs (RP1) answers SSH, and `state` adds the cause."""
        self._pod = None
        if not box.extra.get("instance_id"):
            return None
        try:
            status = self._pod = pod_status(store, box)
        except UserError:
            return None  # the API is unreachable or the key unset: SSH may still answer
        if status["state"] in ("running", "zero-gpu", "fewer-gpus"):
            return None
        gotcha = f" ({status['gotcha']})" if status.get("gotcha") else ""
        cause = f"RunPod pod {status['instance_id']} is {status['state']}{gotcha}"
        if run.status in TERMINAL:
            run_status = run.status
        elif status["state"] == "gone":
            run_status = "vanished"
        else:
            run_status = "paused"
        return {**summarize({}), "status": run_status, "exit_code": run.exit_code,
                "causes": [cause], "advice": status["advice"]}

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

    def stops_meter(self, box: Box) -> bool:
        # a pod registered by hand (`rgt up --ssh`) has no pod id for the API to act on
        return bool(box.extra.get("instance_id"))

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

    def release(self, store: Store, box: Box) -> Released:
        """Terminate (DELETE /v2/pods/{id}), then poll until the API answers 404: a 204 from
        delete does not mean the pod is gone (RP14). A network volume keeps billing."""
        if not box.extra.get("instance_id"):
            return Released(
                "rgt has no RunPod pod id for this box (it was registered by hand with `rgt "
                "up --ssh`, not rented by rgt): terminate it yourself in the console — a stop "
                "keeps billing its volume disk at twice the rate (RP4)",
                still_billing=[f"RunPod pod {box.name} until you terminate it"])
        pod_id = _pod_id(box)
        poll_s = poll_interval()
        still_billing: list[str] = []
        with rp.client() as api:
            if rp.get_pod(api, pod_id) is not None:
                try:
                    api.delete(f"/v2/pods/{pod_id}")
                except rp.ApiError as err:
                    if err.status != 404:
                        raise
            store.record("cloud-terminate", {"instance_id": pod_id}, box=box.name)
            deadline = time.monotonic() + self.confirm_s
            polls = 0
            while (pod := rp.get_pod(api, pod_id)) is not None \
                    and pod.get("status") != "TERMINATED":
                polls += 1
                if time.monotonic() > deadline:
                    raise UserError(f"terminate was accepted but RunPod still shows pod "
                                    f"{pod_id} ({pod.get('status')}) after "
                                    f"{self.confirm_s:.0f} s; it may still bill — check "
                                    f"{rp.CONSOLE} (RP14)")
                time.sleep(poll_s)
            vol = box.extra.get("network_volume")
            if vol:
                try:
                    current = api.get(f"/v2/network-volumes/{vol['id']}")
                except rp.ApiError as err:
                    if err.status != 404:
                        raise
                    current = None  # already deleted: nothing bills
                if current:
                    still_billing.append(rp.volume_billing_line(current))
        extra = {**store.box(box.name).extra, "still_billing": still_billing,
                 "terminated_at": time.time()}
        store.update_box(box.name, extra=extra)
        store.record("cloud-terminated", {"instance_id": pod_id, "polls": polls,
                                          "still_billing": still_billing}, box=box.name)
        return Released(f"terminated RunPod pod {pod_id} (confirmed gone after {polls} "
                        f"poll(s): the API no longer has it, RP14)", still_billing=still_billing)


def _gigabytes(size: str) -> int:
    """'50G' → 50, '1T' → 1000 (RunPod counts its disks in GB)."""
    text = str(size).strip().upper().rstrip("B")
    scale = {"T": 1000, "G": 1, "M": 0.001}.get(text[-1:])
    number = text[:-1] if scale is not None else text
    try:
        return max(1, round(float(number) * (scale or 1)))
    except ValueError:
        raise UserError(f"--disk {size!r}: give a size such as 50G") from None
