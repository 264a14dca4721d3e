"""`rgt up NAME --profile CLOUD --nodes N`: N rented instances as one box of N nodes
(rgt.remote.group), the same way on every cloud that rents through `RentedPlatform`, with the
single instance's money rules:

- **Recorded the moment it exists**: instance k is created as `NAME-k`, and its `cloud-launch`
  event (box NAME, its rank) is written as soon as the create answered, before the next create.
  Creates run one after another — the first decides the region / data centre the others are
  pinned to, and some APIs pace creates (Lambda: one launch per 10 s) — and the waits for boot
  run in parallel, so N nodes boot in about the time of one.
- **Never pays twice**: a live instance already carrying the name `NAME-k` (left by an `rgt up`
  killed mid-group, or a create whose answer was lost) is adopted, never created again; one
  that another box of this store holds is never taken.
- **A partial group is not left billing unseen**: instance k failing to create, to boot or to
  answer SSH releases every instance created (each confirmed gone) — or keeps them with
  `--keep-partial`, named with how to stop each — said in ONE line.
- **Release** destroys every node's instance and polls until each is gone; one that could not be
  confirmed is named (it may still bill) and `rgt down` can be run again to finish.

A cloud takes part through four hooks on its platform: `group_plan` (everything checked and
looked up once before the first create), `create_node` (one `create_once`), `node_target` and
`node_address` (where a booted instance answers SSH, and where the other nodes reach it: its
private IP where the API gives one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rgt.errors import UserError
from rgt.platforms.base import Released, Request
from rgt.platforms.http import poll_interval
from rgt.profiles import load_profile
from rgt.remote import group
from rgt.remote.reach import target_to_json, transport_for
from rgt.remote.register import when_answering
from rgt.store import Box, Store
from rgt.transport import SshTarget

if TYPE_CHECKING:
    from rgt.platforms.rented import RentedPlatform


@dataclass
class Created:
    """One instance of a group, from the moment its create answered (or it was adopted)."""

    rank: int
    name: str                   # the name it carries at the cloud: NAME-rank
    instance_id: str
    rate: float                 # USD per hour, as the cloud priced it
    region: str | None          # where it landed: the rest of the group goes there
    adopted: bool = False       # found by its name (a lost answer, an earlier `rgt up`)
    detail: dict[str, Any] = field(default_factory=dict)  # for its cloud-launch record


@dataclass
class Plan:
    """What a cloud's `group_plan` settled before the first create."""

    wait_s: float                                   # how long each instance may take to boot
    identity: str | None = None
    user: str | None = None
    port: int | None = None
    data_dir: str | None = None
    durable_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)   # the cloud's facts for box.extra
    context: dict[str, Any] = field(default_factory=dict)  # what create_node needs


def node_name(box: str, rank: int) -> str:
    return f"{box}-{rank}"


def held_ids(store: Store) -> set[str]:
    """Instance ids that boxes of this store still hold (up): never adopted into a group."""
    held: set[str] = set()
    for box in store.boxes():
        if box.state != "up":
            continue
        if box.extra.get("instance_id") is not None:
            held.add(str(box.extra["instance_id"]))
        for record in box.extra.get("nodes") or []:
            if isinstance(record, dict) and record.get("instance_id") is not None:
                held.add(str(record["instance_id"]))
    return held


def rent_group(cloud: RentedPlatform, store: Store, request: Request) -> Box:
    """Rent `request.resources.nodes` instances and register them as one box of that many
    nodes, head first; see the module docstring for the rules."""
    count = request.resources.nodes
    cloud.refuse_before_renting(request)
    cloud.refuse_taken_name(store, request.name)
    say = request.on_wait
    created: list[Created] = []
    with cloud.client() as api:
        plan = cloud.group_plan(api, store, request)
        held = held_ids(store)
        region = request.resources.region
        for rank in range(count):
            name = node_name(request.name, rank)
            try:
                listed = cloud.named(api, name)  # one listing: to adopt, and as create's `before`
                node = adopt_left(cloud, api, rank, name, listed, held) or \
                    cloud.create_node(api, plan, rank, name, region,
                                      created[0] if created else None,
                                      {r.get("id") for r in listed}, say)
            except Exception as err:  # noqa: BLE001  (whatever it was, the others bill)
                raise partial(cloud, store, request, created, f"node {rank} ({name}) failed to "
                              f"{cloud.create_word}", err) from None
            cloud.record_create(store, request.name, node.instance_id, node.adopted,
                                rank=rank, node=name, region=node.region, **node.detail)
            created.append(node)
            region = region or node.region
            made = cloud.create_word + ("d" if cloud.create_word.endswith("e") else "ed")
            say(f"node {rank}: {'adopted' if node.adopted else made} "
                f"{cloud.service} {cloud.thing} {node.instance_id} ({name}"
                f"{', ' + node.region if node.region else ''}, ${node.rate:.2f}/h)")
        poll_s = poll_interval()

        def boot(node: Created) -> dict[str, Any]:
            with cloud.client() as own:  # one client a thread: its pacing is its own
                return cloud.wait_ready(own, node.instance_id, wait_s=plan.wait_s,
                                        poll_s=poll_s,
                                        on_wait=lambda line: say(f"node {node.rank}: {line}"))
        try:
            rows = group.in_parallel(created, boot, name=lambda n: f"node {n.rank} ({n.name})")
        except Exception as err:  # noqa: BLE001  (whatever it was, every node bills)
            raise partial(cloud, store, request, created, "the group did not boot", err,
                          all_created=True) from None
    try:
        targets = [cloud.node_target(row, plan) for row in rows]
        addresses = [cloud.node_address(row) for row in rows]
        wait_for_ssh(targets, say)
        box = group.register(store, request.name, load_profile(cloud.profile), targets,
                             rate=round(sum(n.rate for n in created), 6),
                             data_dir=plan.data_dir, durable_dir=plan.durable_dir,
                             addresses=addresses,
                             instance_ids=[n.instance_id for n in created])
    except Exception as err:  # noqa: BLE001  (whatever it was, every node bills)
        raise partial(cloud, store, request, created, "registering the nodes over SSH failed",
                      err, all_created=True) from None
    store.update_box(request.name, extra={
        **box.extra, "platform": cloud.name, "instance_id": created[0].instance_id,
        **plan.extra, "region": created[0].region,
        "node_rates": [n.rate for n in created]})
    return store.box(request.name)


def adopt_left(cloud: RentedPlatform, api: Any, rank: int, name: str,
               listed: list[dict[str, Any]], held: set[str]) -> Created | None:
    """The live instance already carrying `name` (an earlier `rgt up` of this group was killed
    after its create): adopted, never paid for twice. Several: each named, nothing created.
    `listed`: the cloud's instances named `name`."""
    rows = [r for r in listed if str(r.get("id")) not in held]
    live = []
    for row in rows:
        found = cloud.find(api, str(row.get("id")))
        try:
            if found is not None and not cloud.released(found, str(row.get("id"))):
                live.append(found)
        except UserError:
            continue  # a release that went wrong (Lambda: unhealthy) is not ours to adopt
    if not live:
        return None
    if len(live) > 1:
        ids = ", ".join(str(r.get("id")) for r in live)
        raise UserError(f"{cloud.service} lists {len(live)} {cloud.thing}s named {name!r} "
                        f"({ids}), ALL BILLING: {cloud.kill} the extras in {cloud.console}, "
                        "then run `rgt up` again (it adopts the one left)")
    found = live[0]
    return Created(rank, name, str(found["id"]), cloud.node_rate(found),
                   cloud.node_region(found), adopted=True, detail={"left_by": "an earlier up"})


def wait_for_ssh(targets: list[SshTarget], say: Any, *, attempts: int = 10) -> None:
    """Every node answers SSH (a fresh instance may not yet): each, at once, retried as
    `register.when_answering` retries one instance."""
    def one(target: SshTarget) -> None:
        probe = Box(name="ssh-probe", profile="generic-ssh", connection=target_to_json(target),
                    data_dir="", durable_dir="", rate=None, state="up", created=time.time())

        def answer() -> None:
            transport = transport_for(probe)
            try:
                transport.run("true", timeout=30)
            finally:
                transport.close()
        when_answering(answer, lambda line: say(f"{target.host}:{target.port or 22}: {line}"),
                       attempts=attempts, pause_s=min(3.0, poll_interval()))
    group.in_parallel(targets, one, name=lambda t: f"{t.user}@{t.host}:{t.port or 22}")


def partial(cloud: RentedPlatform, store: Store, request: Request, created: list[Created],
            what: str, err: Exception, *, all_created: bool = False) -> UserError:
    """ONE line for a group that could not be formed: how many instances exist, what failed,
    and what became of them (released and confirmed gone, or kept and billing)."""
    count = request.resources.nodes
    why = str(err).rstrip(".")
    head = (f"rented {len(created)} of {count} {cloud.thing}s; {what} ({why})"
            if not all_created else f"rented {count} of {count} {cloud.thing}s but {what} "
                                    f"({why})")
    if not created:
        return UserError(f"{head}; nothing was rented, nothing bills")
    ids = ", ".join(f"node {n.rank} ({n.instance_id})" for n in created)
    if request.options.get("keep_partial"):
        store.record("cloud-group-kept", {"instance_ids": [n.instance_id for n in created]},
                     box=request.name)
        return UserError(f"{head}: kept {ids} as asked (--keep-partial), BILLING: {cloud.kill} "
                         f"each in {cloud.console} when done")
    gone, left = release_instances(cloud, store, request.name,
                                   [(n.rank, n.instance_id) for n in created])
    if left:
        return UserError(f"{head}: released {', '.join(gone) or 'none'} (confirmed gone) but "
                         f"{'; '.join(left)} — {cloud.kill} it in {cloud.console}")
    return UserError(f"{head}: released {ids} (confirmed gone); nothing bills")


def release_instances(cloud: RentedPlatform, store: Store, box: str,
                      nodes: list[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """`destroy` every instance, then poll them together until the cloud says each is gone.
    Returns (the nodes confirmed gone, a line for each that may still bill)."""
    gone: list[str] = []
    left: list[str] = []
    pending: dict[int, str] = {}
    poll_s = poll_interval()
    from rgt.platforms.rented import RELEASE_ASKED, RELEASED
    with cloud.client() as api:
        for rank, instance_id in nodes:
            what = f"node {rank} ({instance_id})"
            try:
                found = cloud.find(api, instance_id)
                if found is None or cloud.released(found, instance_id):
                    gone.append(what)  # already gone (a `down` run again): nothing to ask
                    continue
                cloud.destroy(api, instance_id)
            except UserError as err:
                left.append(f"{what} may still bill ({err})")
                continue
            store.record(RELEASE_ASKED, {"instance_id": instance_id, "rank": rank,
                                         "verb": cloud.kill}, box=box)
            pending[rank] = instance_id
        deadline = time.monotonic() + cloud.confirm_s
        while pending:
            for rank, instance_id in list(pending.items()):
                what = f"node {rank} ({instance_id})"
                try:
                    found = cloud.find(api, instance_id)
                    done = found is None or cloud.released(found, instance_id)
                except UserError as err:
                    left.append(f"{what} may still bill ({err})")
                    del pending[rank]
                    continue
                if done:
                    gone.append(what)
                    del pending[rank]
                    store.record(RELEASED, {"instance_id": instance_id, "rank": rank,
                                            "verb": cloud.kill}, box=box)
                elif time.monotonic() > deadline:
                    left.append(f"{what} is still {cloud.status_of(found or {})} after "
                                f"{cloud.confirm_s:.0f} s and may still bill"
                                f"{cloud.release_gotcha}")
                    del pending[rank]
            if pending:
                time.sleep(poll_s)
    return gone, left


def release_group(cloud: RentedPlatform, store: Store, box: Box,
                  members: list[group.Node]) -> Released:
    """`rgt down` of a rented group: every node's instance destroyed, each confirmed gone; one
    that is not is named (it may still bill) and the release fails, so `rgt down` can be run
    again to finish (instances already gone are skipped)."""
    missing = [n for n in members if n.instance_id is None]
    if missing:
        raise UserError(f"box {box.name}'s record has no {cloud.service} {cloud.thing} id for "
                        f"{', '.join(group.describe(n) for n in missing)}: {cloud.kill} it in "
                        f"{cloud.console}")
    gone, left = release_instances(cloud, store, box.name,
                                   [(n.rank, str(n.instance_id)) for n in members])
    if left:
        store.update_box(box.name, extra={**store.box(box.name).extra,
                                          "still_billing": [f"{box.name} {line}"
                                                            for line in left]})
        raise UserError(f"{cloud.kill}ed {len(gone)} of {len(members)} {cloud.service} "
                        f"{cloud.thing}s of {box.name}; {'; '.join(left)}: check "
                        f"{cloud.console}, then `rgt down {box.name}` again to finish")
    with cloud.client() as api:
        billing = cloud.still_billing(api, box)
    extra = {**store.box(box.name).extra, "terminated_at": time.time()}
    if billing is not None:
        extra["still_billing"] = billing
    else:
        extra.pop("still_billing", None)
    store.update_box(box.name, extra=extra)
    return Released(f"{cloud.kill}ed {len(members)} {cloud.service} {cloud.thing}s of "
                    f"{box.name}: {', '.join(gone)} (each confirmed gone)",
                    still_billing=billing or [])


def ssh_target(host: str, port: int | None, user: str, identity: str | None) -> SshTarget:
    return SshTarget(host=host, port=port, user=user,
                     identity=Path(identity).expanduser() if identity else None)
