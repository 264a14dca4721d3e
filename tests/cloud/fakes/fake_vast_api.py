"""A fake vast.ai API, with the request/response shapes of the docs and the official client.

Sources: https://docs.vast.ai/api-reference (base https://console.vast.ai/api/v0, auth
`Authorization: Bearer KEY`) and the official client, PyPI `vastai` 1.9.1
(github.com/vast-ai/vast-cli: vastai/api/offers.py, vastai/api/instances.py,
vastai/api/client.py, vastai/cli/commands/{offers,instances}.py).
tests/cloud/test_cloud_vastai_cli.py runs that client, unmodified, against this fake
(`server_url` is what its --url / VAST_URL take).

- POST   /api/v0/bundles/     search offers (docs: search-offers; client `search offers`,
                              api/offers.py search_offers): the body IS the query: field filters
                              {"field": {"eq"|"neq"|"gt"|"gte"|"lt"|"lte"|"in"|"notin": v}} plus
                              "order": [[field, "asc"|"desc"]], "type" (on-demand|bid|reserved),
                              "limit", "allocated_storage" (GB the prices include) → {"offers"}
- PUT    /api/v0/search/asks/ the newer search (client `search offers --new`, search_offers_new):
                              {"select_cols": [...], "q": {the same query}} → {"offers"}
- GET    /api/v0/bundles/?q=  the legacy search, still answered (rgt no longer sends it)
- PUT    /api/v0/asks/{id}/   create instance (docs: create-instance; api/instances.py
                              build_create_instance_payload): {client_id, image, env, price, disk,
                              label, extra, onstart, image_login, python_utf8, lang_utf8,
                              use_jupyter_lab, jupyter_dir, force, cancel_unavail,
                              template_hash_id, user, runtype?, args?, volume_info?} → {"success":
                              true, "new_contract": ID}. runtype is one documented word (ssh,
                              ssh_direct, ssh_proxy, jupyter, jupyter_direct, args) or the
                              client's space-separated list ('ssh_direc ssh_proxy' for --ssh
                              --direct, 'jupyter_direc ssh_direc ssh_proxy', 'jupyter_proxy
                              ssh_proxy'); limits: onstart + args <= 4096 characters, env values
                              <= 256 (issue 12 item 5).
- GET    /api/v0/instances/   show instances: {"instances": [rows]}; pages when `page_size` is
                              set ({"next_token"}, next page by ?after_token=), as announced.
- GET    /api/v1/instances/   the paged listing the client reads (show_instances_v1):
                              ?select_filters={json}&order_by=[{"col","dir"}]&limit<=25
                              &after_token=&select_cols=[...] → {"instances", "next_token",
                              "total_instances", "label_counts"}
- GET    /api/v0/instances/{id}/?owner=me  show instance (show_instance): {"instances": row},
                              {"instances": null} when it does not exist
- PUT    /api/v0/instances/{id}/  {"state": "running"|"stopped"} (start/stop_instance) or
                              {"label": str} (label_instance) → {"success": true}
- DELETE /api/v0/instances/{id}/  destroy (destroy_instance sends the body {}) → {"success": true}

Rows carry what the client reads unconditionally: `start_date` (epoch seconds) and
`extra_env` as [[NAME, VALUE], ...] (show_instance/show_instances index both).

Errors: 401 {"success": false, "error": "invalid_user", "msg": ...} on a missing/wrong key, 400
{"success": false, "error": "invalid_args", "msg": ...} on a bad request, 404 on an unknown ask or
instance, 429 with the reason in `detail` (`rate_limit_next`; the client honours Retry-After) and
the daily search quota, 429 {"error": "search_quota_exceeded", "msg"} with X-RateLimit-Reset
(`search_quota_next`; api/client.py is_search_quota_exceeded: never retried, it resets at UTC
midnight). Bidding: vast.ai/article/Rental-Types (price below min_bid refused).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from fake_http import FakeApi, Request

OPS = {"eq": lambda a, b: a == b, "neq": lambda a, b: a != b, "gt": lambda a, b: a > b,
       "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
       "in": lambda a, b: a in b, "notin": lambda a, b: a not in b}
META_KEYS = {"order", "type", "limit", "allocated_storage", "disable_bundling"}
OFFER_TYPES = {"on-demand", "bid", "reserved"}
HOURS_PER_MONTH = 730  # storage_cost is $/GB/month; the hourly price spreads it over 730 h
# The create body's fields: what the official client's build_create_instance_payload sends.
# Anything else is refused here so that a misspelt field in rgt fails a test instead of being
# dropped unseen (whether vast.ai itself refuses one is not documented).
CREATE_FIELDS = {"client_id", "image", "env", "price", "disk", "label", "extra", "onstart",
                 "image_login", "python_utf8", "lang_utf8", "use_jupyter_lab", "jupyter_dir",
                 "force", "cancel_unavail", "template_hash_id", "user", "runtype", "args",
                 "volume_info", "target_state"}
RUNTYPES = {"ssh", "ssh_direct", "ssh_proxy", "jupyter", "jupyter_direct", "args"}
# the client's space-separated runtypes (api/instances.py resolve_runtype)
RUNTYPE_LISTS = {"ssh_direc ssh_proxy", "jupyter_direc ssh_direc ssh_proxy",
                 "jupyter_proxy ssh_proxy"}
V1_PAGE_MAX = 25  # /api/v1/instances/: at most 25 rows a request (the client asks for 25)

BOOT = [("created", None, "Pulling image"),
        ("loading", None, "Pulling image pytorch/pytorch:2.4.0: 3/10 layers"),
        ("loading", None, "Pulling image pytorch/pytorch:2.4.0: 9/10 layers"),
        ("running", "running", "success, running pytorch/pytorch_2.4.0/ssh")]


def offer(id: int, *, gpu: str = "RTX 4090", dph: float = 0.40, reliability: float = 0.995,
          verified: bool = True, direct: int = 4, cuda: float = 12.4, rentable: bool = True,
          up: float = 0.0, down: float = 0.0, min_bid: float = 0.15,
          **fields: Any) -> dict[str, Any]:
    """One offer row. `reliability` is both `reliability2` (what the API's rows and rgt read)
    and `reliability` (the field the client's queries name: offers_fields lists it, not
    reliability2). Sizes are in the API's units: gpu_ram/cpu_ram in MB, duration in seconds."""
    return {"id": id, "ask_contract_id": id, "gpu_name": gpu, "num_gpus": 1, "dph_base": dph,
            "dph_total": dph, "storage_total_cost": 0.0, "external": False, "score": 1.0,
            "inet_up_cost": up, "inet_down_cost": down, "reliability2": reliability,
            "reliability": reliability,
            "verified": verified, "rentable": rentable, "rented": False,
            "direct_port_count": direct, "cuda_max_good": cuda, "driver_version": "550.54.14",
            "disk_space": 200.0, "storage_cost": 0.15, "min_bid": min_bid,
            "geolocation": "Sweden, SE", "gpu_ram": 24564.0, "gpu_total_ram": 24564.0,
            "cpu_ram": 64000.0, "cpu_cores": 16, "cpu_cores_effective": 8.0,
            "duration": 30 * 86400.0, "compute_cap": 890, "total_flops": 82.6,
            "datacenter": False, "cpu_arch": "amd64", "inet_up": 800.0, "inet_down": 900.0,
            "machine_id": 4242, "host_id": 77, **fields}


def _driver_number(version: str) -> int:
    """535.86.05 → 535086005: the one number the client sends for a dotted driver_version
    (vastai/api/query.py numeric_version), so that >= compares versions."""
    major, minor, patch = version.split(".")
    return int(major.zfill(3) + minor.zfill(3) + patch.zfill(3))


def _as_row_type(key: str, row_value: Any, want: Any) -> Any:
    """A query value as the row's type: the client sends numbers as the text typed ("1",
    "0.98"), lists of them for in/notin, and a geolocation as a country code ("SE")."""
    if isinstance(want, list):
        return [_as_row_type(key, row_value, w) for w in want]
    if want is None or isinstance(row_value, bool) or isinstance(want, bool):
        return want
    if isinstance(row_value, int | float):
        try:
            return float(want)
        except (TypeError, ValueError):
            raise ValueError(f"{want!r} is not a number") from None
    return want


def _holds(key: str, row_value: Any, op: str, want: Any) -> bool:
    if key == "geolocation" and isinstance(row_value, str):  # "Sweden, SE" is matched by SE
        row_value = row_value.rsplit(",", 1)[-1].strip()
    if key == "driver_version" and isinstance(want, int | float) and isinstance(row_value, str):
        row_value = _driver_number(row_value)
    want = _as_row_type(key, row_value, want)
    if isinstance(row_value, bool) and isinstance(want, str):  # "true"/"false" as typed
        want = want.lower() == "true"
    return OPS[op](row_value, want)


class FakeVast(FakeApi):
    prefix = "/api"  # /api/v0 for everything, /api/v1 for the client's paged instance list

    @property
    def url(self) -> str:
        """rgt's base URL (RGT_VAST_API_URL): the v0 API."""
        return super().url + "/v0"

    def fail_after(self, method: str, path_start: str, status: int = 502) -> None:
        super().fail_after(method, "/v0" + path_start, status)

    def fail_before(self, method: str, path_start: str, status: int = 502,
                    skip: int = 0) -> None:
        super().fail_before(method, "/v0" + path_start, status, skip)

    def calls(self, method: str, path_start: str = "") -> list[Request]:
        """Requests to `path_start` of the v0 API, or of v1 when it starts with /v1/."""
        version = "" if path_start.startswith(("/v0/", "/v1/")) else "/v0"
        return super().calls(method, version + path_start)

    @property
    def server_url(self) -> str:
        """The official client's --url / VAST_URL: the server, to which it adds /api/v0|v1."""
        return super().url[: -len(self.prefix)]

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
        self.search_quota_next = 0  # answer this many searches 429 search_quota_exceeded
        # (host, port) the k-th instance created publishes 22/tcp at (several machines: a
        # group's nodes); empty: every instance at 127.0.0.1:ssh_port
        self.hosts: list[tuple[str, int]] = []

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
        status, answer = self._create(offer_id, {"client_id": "me", "image": image, "disk": 20,
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
        version, *parts = [p for p in req.path.split("/") if p] or [""]
        if version == "v1" and req.method == "GET" and parts == ["instances"]:
            return 200, self._v1_page(req.query)
        if version != "v0":
            return 404, {"success": False, "error": "not_found", "msg": f"{req.method} {req.path}"}
        if parts in (["bundles"], ["search", "asks"]) and self.search_quota_next:
            self.search_quota_next -= 1
            return 429, {"success": False, "error": "search_quota_exceeded",
                         "msg": "Daily search quota exceeded"}, \
                {"X-RateLimit-Reset": str(int(time.time()) + 3600)}
        if req.method == "GET" and parts == ["bundles"]:  # legacy
            try:
                return self._search(json.loads(req.query.get("q", "{}")))
            except ValueError:
                return 400, {"success": False, "error": "invalid_args", "msg": "q is not JSON"}
        if req.method == "POST" and parts == ["bundles"]:
            return self._search(req.body if req.body is not None else {})
        if req.method == "PUT" and parts == ["search", "asks"]:
            body = req.body if isinstance(req.body, dict) else {}
            if not isinstance(body.get("q"), dict):
                return 400, {"success": False, "error": "invalid_args",
                             "msg": "q must be an object"}
            return self._search(body["q"])
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
                return self._manage(inst, req.body if isinstance(req.body, dict) else {})
        return 404, {"success": False, "error": "not_found", "msg": f"{req.method} {req.path}"}

    def _manage(self, inst: dict[str, Any], body: dict[str, Any]) -> tuple[int, Any]:
        """start/stop ({"state"}) or label ({"label"}): one of them, nothing else."""
        if not body or set(body) - {"state", "label"}:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": "give state (running|stopped) or label"}
        if "state" in body:
            if body["state"] not in ("running", "stopped"):
                return 400, {"success": False, "error": "invalid_args",
                             "msg": "state must be running or stopped"}
            inst["intended_status"] = body["state"]
        if "label" in body:
            if not isinstance(body["label"], str):
                return 400, {"success": False, "error": "invalid_args",
                             "msg": "label must be a string"}
            inst["label"] = body["label"]
        return 200, {"success": True}

    def _search(self, q: Any) -> tuple[int, Any]:
        if not isinstance(q, dict):
            return 400, {"success": False, "error": "invalid_args", "msg": "query is not an object"}
        if q.get("type", "on-demand") not in OFFER_TYPES:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": f"type must be one of {sorted(OFFER_TYPES)}"}
        storage = q.get("allocated_storage", 0.0)
        if not isinstance(storage, int | float) or storage < 0:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": "allocated_storage must be a number of GB"}
        for key, want in self.required_query.items():
            if q.get(key) != want:
                return 400, {"success": False, "error": "test_assertion",
                             "msg": f"search without {key}={want}: got {q.get(key)}"}
        # prices include the disk asked for: dph_total = dph_base + storage for allocated_storage
        rows = [{**o, "storage_total_cost": o["storage_cost"] * storage / HOURS_PER_MONTH,
                 "dph_total": o["dph_base"] + o["storage_cost"] * storage / HOURS_PER_MONTH}
                for o in self.offers]
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
                    try:
                        rows = [r for r in rows if key in r and _holds(key, r[key], op, value)]
                    except ValueError as e:
                        return 400, {"success": False, "error": "invalid_args",
                                     "msg": f"{key}: {e}"}
            for field, direction in q.get("order", []):
                rows.sort(key=lambda r, f=field: r.get(f, 0), reverse=direction == "desc")
        return 200, {"offers": rows}

    def _create(self, offer_id: int, body: dict[str, Any]) -> tuple[int, Any]:
        ask = next((o for o in self.offers if o["id"] == offer_id), None)
        if ask is None or not ask["rentable"] or ask["rented"]:
            return 404, {"success": False, "error": "no_such_ask",
                         "msg": f"Instance type by id {offer_id} is not available."}
        unknown = sorted(set(body) - CREATE_FIELDS)
        if unknown:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": f"unknown fields: {', '.join(unknown)}"}
        if not body.get("image"):
            return 400, {"success": False, "error": "invalid_args", "msg": "image is required"}
        if not isinstance(body.get("disk"), int | float) or body["disk"] < 10:
            return 400, {"success": False, "error": "invalid_args", "msg": "disk must be >= 10"}
        if body.get("runtype") not in RUNTYPES | RUNTYPE_LISTS:
            return 400, {"success": False, "error": "invalid_args", "msg": "bad runtype"}
        if not isinstance(body.get("env") or {}, dict):
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
            "start_date": time.time(), "disk_space": body["disk"], "machine_id": 4242,
            "extra_env": [[k, str(v)] for k, v in (body.get("env") or {}).items()],
            "actual_status": None, "intended_status": "running", "cur_state": "running",
            "status_msg": None, "dph_total": price if price is not None else ask["dph_total"],
            "is_bid": price is not None, "gpu_name": ask["gpu_name"], "num_gpus": 1,
            "ssh_host": "ssh5.vast.ai", "ssh_port": 31234, "public_ipaddr": None, "ports": {},
            "_env": body.get("env") or {}, "_onstart": body.get("onstart") or "",
            "_runtype": body["runtype"], "_boot": list(self.boot),
            "_endpoint": self.hosts[len(self.instances) % len(self.hosts)] if self.hosts
            else None,
        }
        return 200, {"success": True, "new_contract": instance_id}

    def _page(self, rows: list[dict[str, Any]], after: str | None) -> dict[str, Any]:
        if not self.page_size:
            return {"instances": rows}
        start = int(after or 0)
        end = start + self.page_size
        return {"instances": rows[start:end], "next_token": str(end) if end < len(rows) else None,
                "total_instances": len(rows)}

    def _v1_page(self, query: dict[str, str]) -> dict[str, Any]:
        """GET /api/v1/instances/ as the client reads it (api/instances.py show_instances_v1)."""
        filters = json.loads(query.get("select_filters") or "{}")
        order = json.loads(query.get("order_by") or '[{"col": "id", "dir": "asc"}]')
        limit = max(1, min(int(query.get("limit") or V1_PAGE_MAX), V1_PAGE_MAX))
        rows = self._list()
        for key, cond in filters.items():
            for op, value in cond.items():
                rows = [r for r in rows if OPS[op](r.get(key), value)]
        for o in reversed(order):
            rows.sort(key=lambda r, c=o["col"]: (r.get(c) is None, r.get(c) or 0),
                      reverse=o.get("dir") == "desc")
        start = int(query.get("after_token") or 0)
        page = rows[start:start + limit]
        if query.get("select_cols"):
            cols = set(json.loads(query["select_cols"])) | {"id"}
            page = [{k: v for k, v in r.items() if k in cols} for r in page]
        labels: dict[str, int] = {}
        for r in rows:
            labels[r.get("label") or ""] = labels.get(r.get("label") or "", 0) + 1
        end = start + limit
        return {"instances": page, "next_token": str(end) if end < len(rows) else None,
                "total_instances": len(rows), "label_counts": labels}

    def _show(self, inst: dict[str, Any]) -> dict[str, Any]:
        """One look at an instance (a listing or a show): it moves one boot step."""
        if "_destroyed_after" in inst:
            inst["_destroyed_after"] -= 1
        elif inst["_boot"]:
            actual, _, msg = inst["_boot"].pop(0)
            inst.update(actual_status=actual, status_msg=msg)
            if actual == "running" and inst["_runtype"].endswith("direct"):
                host, port = inst.get("_endpoint") or ("127.0.0.1", self.ssh_port)
                inst.update(public_ipaddr=host,
                            ports={"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(port)}]})
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def _list(self) -> list[dict[str, Any]]:
        return [self._show(inst) for inst in list(self.instances.values())
                if inst.get("_destroyed_after", 1) > 0]
