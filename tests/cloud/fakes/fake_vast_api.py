"""A fake vast.ai API, with the documented request/response shapes.

Docs: https://docs.vast.ai/api-reference (base https://console.vast.ai/api/v0, auth
`Authorization: Bearer KEY`):

- GET    /bundles/?q={json}   search offers (docs.vast.ai/api-reference/search/search-offers):
                              q holds field filters {"field": {"eq"|"gte"|"lte"|...: v}},
                              "order": [[field, "asc"|"desc"]], "type", "limit" → {"offers": [...]}
- PUT    /asks/{offer_id}/    create instance (…/instances/create-instance):
                              {client_id, image, disk, onstart, env, runtype, price?, label}
                              → {"success": true, "new_contract": ID}
- GET    /instances/          show instances (…/instances/show-instances): {"instances": [{id,
                              actual_status, intended_status, cur_state, status_msg, ssh_host,
                              ssh_port, public_ipaddr, ports: {"22/tcp": [{HostIp, HostPort}]},
                              dph_total, ...}]}
                              Pages when `page_size` is set: {"instances": [...], "next_token"},
                              the next page asked with ?after_token= (the official vastai 1.9.1
                              client's show_instances: /api/v1/instances/, limit ≤ 25, next_token
                              → after_token; GET /instances/ is announced to page the same way).
- GET    /instances/{id}/     show instance (vastai 1.9.1 api/instances.py show_instance):
                              {"instances": row}, {"instances": null} when it does not exist
- PUT    /instances/{id}/     manage instance: {"state": "running"|"stopped"} → {"success": true}
- DELETE /instances/{id}/     destroy instance → {"success": true}

Errors: 401 {"success": false, "error": "invalid_user", "msg": ...} on a missing/wrong key, 400
{"success": false, "error": "invalid_args", "msg": ...} on a bad request, 404 on an unknown ask or
instance, 429 on rate limiting with the reason in `detail` (`rate_limit_next`; the official
client honours Retry-After on 429). Bidding: vast.ai/article/Rental-Types (price below min_bid
refused).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from fake_http import FakeApi, Request

OPS = {"eq": lambda a, b: a == b, "neq": lambda a, b: a != b, "gt": lambda a, b: a > b,
       "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
       "in": lambda a, b: a in b, "notin": lambda a, b: a not in b}
META_KEYS = {"order", "type", "limit", "allocated_storage"}

BOOT = [("created", None, "Pulling image"),
        ("loading", None, "Pulling image pytorch/pytorch:2.4.0: 3/10 layers"),
        ("loading", None, "Pulling image pytorch/pytorch:2.4.0: 9/10 layers"),
        ("running", "running", "success, running pytorch/pytorch_2.4.0/ssh")]


def offer(id: int, *, gpu: str = "RTX 4090", dph: float = 0.40, reliability: float = 0.995,
          verified: bool = True, direct: int = 4, cuda: float = 12.4, rentable: bool = True,
          up: float = 0.0, down: float = 0.0, min_bid: float = 0.15) -> dict[str, Any]:
    return {"id": id, "ask_contract_id": id, "gpu_name": gpu, "num_gpus": 1, "dph_total": dph,
            "inet_up_cost": up, "inet_down_cost": down, "reliability2": reliability,
            "verified": verified, "rentable": rentable, "rented": False,
            "direct_port_count": direct, "cuda_max_good": cuda, "driver_version": "550.54.14",
            "disk_space": 200.0, "storage_cost": 0.15, "min_bid": min_bid,
            "geolocation": "Sweden, SE"}


class FakeVast(FakeApi):
    prefix = "/api/v0"

    def __init__(self, key: str, *, ssh_port: int = 22) -> None:
        super().__init__(key)
        self.ssh_port = ssh_port
        self.offers: list[dict[str, Any]] = []
        self.ignore_filters = False  # answer every offer, as a sloppy search would
        self.required_query: dict[str, Any] = {}  # filters every search must carry
        self.instances: dict[int, dict[str, Any]] = {}
        self.boot = list(BOOT)
        self.destroy_polls = 1  # listings during which a destroyed instance still shows
        self._ids = itertools.count(9000001)
        self.page_size: int | None = None  # GET /instances/ pages by this many
        self.rate_limit_next = 0  # answer this many requests 429 {"detail": ...}

    # state changes the host makes, not the client (docs.vast.ai: instance states) -----------

    def preempt(self, instance_id: int, msg: str = "outbid: a higher bid took the GPU") -> None:
        """An interruptible instance loses its GPU: the container stops, the disk stays, and
        vast.ai still intends it to run (it restarts when the GPU frees)."""
        self.instances[instance_id].update(_boot=[], actual_status="exited",
                                           intended_status="running", cur_state="stopped",
                                           status_msg=msg)

    def resume(self, instance_id: int) -> None:
        """The GPU is free again: the container starts (and runs its onstart script)."""
        self.instances[instance_id].update(_boot=[], actual_status="running",
                                           intended_status="running", cur_state="running",
                                           status_msg="success, running")

    def add_instance(self, offer_id: int, image: str) -> int:
        """An instance created on `offer_id` as `rgt up` creates one (a direct SSH port)."""
        status, answer = self._create(offer_id, {"image": image, "disk": 20,
                                                 "runtype": "ssh_direct"})
        assert status == 200, answer
        return answer["new_contract"]

    def set_state(self, instance_id: int, **fields: Any) -> None:
        self.instances[instance_id].update(_boot=[], **fields)

    def unauthorized(self) -> tuple[int, Any]:
        return 401, {"success": False, "error": "invalid_user",
                     "msg": "Invalid user key or missing Authorization header."}

    def handle(self, req: Request) -> tuple[Any, ...]:
        if self.rate_limit_next:
            self.rate_limit_next -= 1
            return 429, {"detail": "API requests too frequent: endpoint threshold=2.0 per 1.0s"}, \
                {"Retry-After": "0"}
        parts = [p for p in req.path.split("/") if p]
        if req.method == "GET" and parts == ["bundles"]:
            return self._search(req.query.get("q", "{}"))
        if req.method == "PUT" and len(parts) == 2 and parts[0] == "asks":
            return self._create(int(parts[1]), req.body or {})
        if req.method == "GET" and parts == ["instances"]:
            return 200, self._page(self._list(), req.query.get("after_token"))
        if len(parts) == 2 and parts[0] == "instances":
            inst = self.instances.get(int(parts[1]))
            if req.method == "GET":
                if inst is None or inst.get("_destroyed_after") == 0:
                    return 200, {"instances": None}
                return 200, {"instances": self._show(inst)}
            if inst is None or inst.get("_destroyed_after") == 0:
                return 404, {"success": False, "error": "no_such_instance",
                             "msg": "Instance not found."}
            if req.method == "DELETE":
                inst["_destroyed_after"] = self.destroy_polls
                return 200, {"success": True}
            if req.method == "PUT":
                state = (req.body or {}).get("state")
                if state not in ("running", "stopped"):
                    return 400, {"success": False, "error": "invalid_args",
                                 "msg": "state must be running or stopped"}
                inst["intended_status"] = state
                return 200, {"success": True}
        return 404, {"success": False, "error": "not_found", "msg": f"{req.method} {req.path}"}

    def _search(self, raw: str) -> tuple[int, Any]:
        try:
            q = json.loads(raw)
        except ValueError:
            return 400, {"success": False, "error": "invalid_args", "msg": "q is not JSON"}
        for key, want in self.required_query.items():
            if q.get(key) != want:
                return 400, {"success": False, "error": "test_assertion",
                             "msg": f"search without {key}={want}: got {q.get(key)}"}
        rows = list(self.offers)
        if not self.ignore_filters:
            for key, cond in q.items():
                if key in META_KEYS:
                    continue
                if not isinstance(cond, dict):
                    return 400, {"success": False, "error": "invalid_args",
                                 "msg": f"filter {key} must be an object"}
                for op, value in cond.items():
                    if op not in OPS:
                        return 400, {"success": False, "error": "invalid_args",
                                     "msg": f"unknown operator {op}"}
                    rows = [r for r in rows if key in r and OPS[op](r[key], value)]
            for field, direction in q.get("order", []):
                rows.sort(key=lambda r, f=field: r.get(f, 0), reverse=direction == "desc")
        return 200, {"offers": rows}

    def _create(self, offer_id: int, body: dict[str, Any]) -> tuple[int, Any]:
        ask = next((o for o in self.offers if o["id"] == offer_id), None)
        if ask is None or not ask["rentable"] or ask["rented"]:
            return 404, {"success": False, "error": "no_such_ask",
                         "msg": f"Instance type by id {offer_id} is not available."}
        if not body.get("image"):
            return 400, {"success": False, "error": "invalid_args", "msg": "image is required"}
        if not isinstance(body.get("disk"), int | float) or body["disk"] < 10:
            return 400, {"success": False, "error": "invalid_args", "msg": "disk must be >= 10"}
        if body.get("runtype") not in ("ssh", "ssh_direct", "ssh_proxy", "jupyter",
                                       "jupyter_direct", "args"):
            return 400, {"success": False, "error": "invalid_args", "msg": "bad runtype"}
        if not isinstance(body.get("env", {}), dict):
            return 400, {"success": False, "error": "invalid_args", "msg": "env must be a dict"}
        # issue 12 item 5 (held against the official client): onstart + args ≤ 4096
        # characters, each env value ≤ 256
        args = body.get("args") or []
        if len(body.get("onstart") or "") + len(" ".join(map(str, args))) > 4096:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": "onstart and args together exceed 4096 characters"}
        if any(len(str(v)) > 256 for v in (body.get("env") or {}).values()):
            return 400, {"success": False, "error": "invalid_args",
                         "msg": "env values must be at most 256 characters"}
        price = body.get("price")
        if price is not None and price < ask["min_bid"]:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": f"bid {price} below min_bid {ask['min_bid']}"}
        ask["rented"] = True
        instance_id = next(self._ids)
        self.instances[instance_id] = {
            "id": instance_id, "label": body.get("label"), "image_uuid": body["image"],
            "actual_status": None, "intended_status": "running", "cur_state": "running",
            "status_msg": None, "dph_total": price if price is not None else ask["dph_total"],
            "is_bid": price is not None, "gpu_name": ask["gpu_name"], "num_gpus": 1,
            "ssh_host": "ssh5.vast.ai", "ssh_port": 31234, "public_ipaddr": None, "ports": {},
            "_env": body.get("env", {}), "_onstart": body.get("onstart", ""),
            "_runtype": body["runtype"], "_boot": list(self.boot),
        }
        return 200, {"success": True, "new_contract": instance_id}

    def _page(self, rows: list[dict[str, Any]], after: str | None) -> dict[str, Any]:
        if not self.page_size:
            return {"instances": rows}
        start = int(after or 0)
        end = start + self.page_size
        return {"instances": rows[start:end], "next_token": str(end) if end < len(rows) else None,
                "total_instances": len(rows)}

    def _show(self, inst: dict[str, Any]) -> dict[str, Any]:
        """One look at an instance (a listing or a show): it moves one boot step."""
        if "_destroyed_after" in inst:
            inst["_destroyed_after"] -= 1
        elif inst["_boot"]:
            actual, _, msg = inst["_boot"].pop(0)
            inst.update(actual_status=actual, status_msg=msg)
            if actual == "running" and inst["_runtype"].endswith("direct"):
                inst.update(public_ipaddr="127.0.0.1",
                            ports={"22/tcp": [{"HostIp": "0.0.0.0",
                                               "HostPort": str(self.ssh_port)}]})
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def _list(self) -> list[dict[str, Any]]:
        return [self._show(inst) for inst in list(self.instances.values())
                if inst.get("_destroyed_after", 1) > 0]
