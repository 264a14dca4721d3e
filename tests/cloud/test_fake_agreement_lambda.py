"""The fake Lambda API's answers, validated against Lambda's published OpenAPI schema.

Each case drives the fake (tests/cloud/fakes/fake_lambda_api.py) over HTTP as a client would and
validates the answer with jsonschema against the response schema Lambda's spec (v1.8.3, extract
in tests/data/lambda_cloud/, see its SOURCE.md) gives for that operation and status: a status the
spec does not list for the operation fails too. So rgt's Lambda code is tested against answers
shaped as Lambda's, not as rgt and the fake merely agree on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from cloudkit import LAMBDA_KEY
from jsonschema import Draft202012Validator

SPEC = json.loads((Path(__file__).resolve().parents[1] / "data" / "lambda_cloud"
                   / "openapi-1.8.3.json").read_text())
LAUNCH = {"region_name": "us-east-1", "instance_type_name": "gpu_1x_h100_pcie",
          "ssh_key_names": ["laptop"], "file_system_names": []}


def spec_errors(method: str, route: str, status: int, body: Any) -> list[str]:
    """What the spec's schema for (method, route, status) finds wrong with `body`."""
    responses = SPEC["paths"]["/api/v1" + route][method.lower()]["responses"]
    if str(status) not in responses:
        return [f"{method} {route} answered {status}; the spec lists {sorted(responses)}"]
    schema = responses[str(status)]["content"]["application/json"]["schema"]
    # the spec's "#/components/..." references resolve inside the document they sit in
    validator = Draft202012Validator({**schema, "components": SPEC["components"]},
                                     format_checker=Draft202012Validator.FORMAT_CHECKER)
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
                  for e in validator.iter_errors(body))


class Client:
    def __init__(self, fake: Any, key: str = LAMBDA_KEY) -> None:
        self.fake, self.key = fake, key

    def __call__(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.fake.url + path, json=body, timeout=10,
                             headers={"Authorization": f"Bearer {self.key}"})

    def launch(self, **fields: Any) -> str:
        self.fake.capacity["gpu_1x_h100_pcie"].add("us-east-1")
        answer = self("POST", "/instance-operations/launch", {**LAUNCH, **fields})
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]["instance_ids"][0]


# each case: what it does to the fake → (method, route as the spec names it, the answer)
def _instance_types(c: Client):
    c.fake.capacity["gpu_1x_a10"].add("us-west-1")
    return "GET", "/instance-types", c("GET", "/instance-types")


def _ssh_keys(c: Client):
    return "GET", "/ssh-keys", c("GET", "/ssh-keys")


def _file_systems(c: Client):
    c.fake.add_filesystem("data", "us-east-1", bytes_used=4096)
    return "GET", "/file-systems", c("GET", "/file-systems")


def _launch(c: Client):
    c.fake.capacity["gpu_1x_h100_pcie"].add("us-east-1")
    return "POST", "/instance-operations/launch", \
        c("POST", "/instance-operations/launch", {**LAUNCH, "name": "run-a"})


def _launch_no_capacity(c: Client):
    return "POST", "/instance-operations/launch", \
        c("POST", "/instance-operations/launch", LAUNCH)


def _launch_filesystem_elsewhere(c: Client):
    c.fake.add_filesystem("far", "us-west-1")
    c.fake.capacity["gpu_1x_h100_pcie"].add("us-east-1")
    return "POST", "/instance-operations/launch", \
        c("POST", "/instance-operations/launch", {**LAUNCH, "file_system_names": ["far"]})


def _launch_invalid(c: Client):
    return "POST", "/instance-operations/launch", \
        c("POST", "/instance-operations/launch", {"region_name": "us-east-1"})


def _list_instances(c: Client):
    c.launch(name="run-a")
    c.launch()
    return "GET", "/instances", c("GET", "/instances")


def _named_booting(c: Client):
    return "GET", "/instances/{id}", c("GET", f"/instances/{c.launch(name='run-a')}")


def _unnamed_active(c: Client):
    instance_id = c.launch()
    for _ in range(c.fake.boot_polls):
        c("GET", f"/instances/{instance_id}")
    answer = c("GET", f"/instances/{instance_id}")
    assert answer.json()["data"]["status"] == "active"
    # the spec's words for `name`: "If set, the user-provided name of the instance"
    assert "name" not in answer.json()["data"], "an unnamed instance has no name, not ''"
    return "GET", "/instances/{id}", answer


def _missing_instance(c: Client):
    return "GET", "/instances/{id}", c("GET", "/instances/inst-none")


def _terminate(c: Client):
    instance_id = c.launch(name="run-a")
    return "POST", "/instance-operations/terminate", \
        c("POST", "/instance-operations/terminate", {"instance_ids": [instance_id]})


def _wrong_key(c: Client):
    c.key = "secret_not-the-key"
    return "GET", "/instances", c("GET", "/instances")


def _account_inactive(c: Client):
    c.fake.account_inactive = True
    return "GET", "/instances", c("GET", "/instances")


CASES: dict[str, Callable[[Client], tuple[str, str, httpx.Response]]] = {
    f.__name__.lstrip("_"): f for f in (
        _instance_types, _ssh_keys, _file_systems, _launch, _launch_no_capacity,
        _launch_filesystem_elsewhere, _launch_invalid, _list_instances, _named_booting,
        _unnamed_active, _missing_instance, _terminate, _wrong_key, _account_inactive)}


@pytest.mark.parametrize("case", CASES)
def test_fake_answer_matches_lambdas_schema(lambda_api, case):
    method, route, answer = CASES[case](Client(lambda_api))
    assert spec_errors(method, route, answer.status_code, answer.json()) == []


def test_the_schema_check_can_fail():
    """The check finds what the fake used to answer (issue 30): a bare instance_type, a null
    ip, a file system without created_by, a status the operation does not list."""
    bare = {"id": "i-1", "status": "booting", "ip": None, "ssh_key_names": [],
            "file_system_names": [], "region": {"name": "us-east-1", "description": "Virginia"},
            "instance_type": {"name": "gpu_1x_a10"}, "actions": {}}
    errors = spec_errors("GET", "/instances/{id}", 200, {"data": bare})
    assert "data/ip: None is not of type 'string'" in errors
    assert any(e.startswith("data/instance_type: 'description' is a required") for e in errors)
    fs = {"id": "fs-1", "name": "d", "mount_point": "/lambda/nfs/d", "is_in_use": False,
          "created": "2026-06-01T00:00:00+00:00", "region": {"name": "us-east-1",
                                                            "description": "Virginia"}}
    assert spec_errors("GET", "/file-systems", 200, {"data": [fs]}) == \
        ["data/0: 'created_by' is a required property"]
    assert spec_errors("GET", "/ssh-keys", 404, {}) == \
        ["GET /ssh-keys answered 404; the spec lists ['200', '401', '403']"]
