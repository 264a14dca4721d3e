"""One stand per platform: how `rgt up` reaches it in a test, and what its control plane (a fake
of the real API, or nothing) says about what was created and released.

A stand answers only what the contract cases ask (tests/contract/test_platform_contract.py):
the `rgt up` arguments that provision a box, the arguments that register a box the user already
has, and for a platform that rents, what its fake holds and how to make it lose an answer or
confirm a release slowly. `why_not` names each case that does not apply, with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

NO_CREATE = "no create call: `rgt up` registers a box that already exists"
NO_CONFIRM = "release removes rgt's own files at once: no control plane to confirm it"


class Stand:
    profile: ClassVar[str]
    why_not: ClassVar[dict[str, str]] = {}

    def __init__(self, request: Any, tmp: Path) -> None:
        self.request, self.tmp = request, tmp

    def up_args(self) -> list[str]:
        raise NotImplementedError

    def hand_args(self) -> list[str]:
        """`rgt up` of a box rented by hand: the real sshd, registered by --ssh."""
        sshd = self.request.getfixturevalue("sshd_server")
        ssh = f"ssh -p {sshd.port} -i {sshd.client_key} root@127.0.0.1"
        return ["--profile", self.profile, "--ssh", ssh, "--data-dir", str(self.tmp / "hand"),
                "--durable-dir", str(self.tmp / "hand-durable")]

    # what a renting platform's fake answers (the cases that need them skip the others)
    def live(self) -> list[Any]:
        """Ids of the instances the control plane holds that are not released."""
        return []

    def destroy_calls(self) -> list[Any]:
        return []

    def lose_create_answer(self) -> None:
        raise NotImplementedError

    def confirm_slowly(self) -> None:
        raise NotImplementedError


class Local(Stand):
    profile = "local"
    why_not = {"lost_create": NO_CREATE, "slow_release": NO_CONFIRM,
               "hand_registered": "the box is this machine: `rgt up` of it is already the "
                                  "registration the verbs-in-order case takes down"}

    def up_args(self) -> list[str]:
        return ["--profile", "local"]


class GenericSsh(Stand):
    profile = "generic-ssh"
    why_not = {"lost_create": NO_CREATE, "slow_release": NO_CONFIRM}

    def up_args(self) -> list[str]:
        return self.hand_args()


class Lambda(Stand):
    profile = "lambda"

    def __init__(self, request: Any, tmp: Path) -> None:
        super().__init__(request, tmp)
        self.fake = request.getfixturevalue("lambda_api")
        self.sshd = request.getfixturevalue("sshd_server")
        self.fake.capacity["gpu_1x_h100_pcie"].add("us-east-1")

    def up_args(self) -> list[str]:
        return ["--profile", "lambda", "--gpu", "H100:1", "--identity",
                str(self.sshd.client_key), "--user", "root", "--port", str(self.sshd.port),
                "--data-dir", str(self.tmp / "nvme"), "--durable-dir", str(self.tmp / "nfs")]

    def live(self) -> list[Any]:
        return [i["id"] for i in self.fake.instances.values() if i["status"] != "terminated"]

    def destroy_calls(self) -> list[Any]:
        return self.fake.calls("POST", "/instance-operations/terminate")

    def lose_create_answer(self) -> None:
        self.fake.fail_after("POST", "/instance-operations/launch", 0)  # done, then dropped

    def confirm_slowly(self) -> None:
        self.fake.terminate_polls = 4  # GETs an instance stays `terminating`


class Vast(Stand):
    profile = "vastai"

    def __init__(self, request: Any, tmp: Path) -> None:
        from cloudkit import IMAGE
        from fake_vast_api import offer

        super().__init__(request, tmp)
        self.fake = request.getfixturevalue("vast_api")
        self.sshd = request.getfixturevalue("sshd_server")
        self.fake.offers = [offer(102, dph=0.35)]
        self.fake.ssh_port = self.sshd.port
        self.image = IMAGE

    def up_args(self) -> list[str]:
        return ["--profile", "vastai", "--offer", "102", "--image", self.image, "--disk", "20",
                "--identity", str(self.sshd.client_key), "--data-dir", str(self.tmp / "ws"),
                "--durable-dir", str(self.tmp / "ws-durable")]

    def live(self) -> list[Any]:
        return [k for k, i in self.fake.instances.items() if i.get("_destroyed_after", 1) > 0]

    def destroy_calls(self) -> list[Any]:
        return self.fake.calls("DELETE", "/instances/")

    def lose_create_answer(self) -> None:
        self.fake.fail_after("PUT", "/asks/102", 0)

    def confirm_slowly(self) -> None:
        self.fake.destroy_polls = 3  # listings during which a destroyed instance still shows


class RunPod(Stand):
    profile = "runpod"

    def __init__(self, request: Any, tmp: Path) -> None:
        from cloudkit import RUNPOD_IMAGE

        super().__init__(request, tmp)
        self.fake = request.getfixturevalue("keyed")  # pods lead to the real sshd
        self.sshd = request.getfixturevalue("sshd_server")
        self.image = RUNPOD_IMAGE

    def up_args(self) -> list[str]:
        return ["--profile", "runpod", "--gpu", "RTX4090:1", "--image", self.image,
                "--identity", str(self.sshd.client_key), "--data-dir",
                str(self.tmp / "workspace"), "--durable-dir", str(self.tmp / "ckpt")]

    def live(self) -> list[Any]:
        return [k for k, p in self.fake.pods.items() if p["_deleted"] is None]

    def destroy_calls(self) -> list[Any]:
        return [c for c in self.fake.calls("DELETE", "/v2/pods/")
                + self.fake.calls("POST", "/v2/pods/") if not c.path.endswith("/pods")]

    def lose_create_answer(self) -> None:
        self.fake.fail_after("POST", "/v2/pods", 0)

    def confirm_slowly(self) -> None:
        self.fake.delete_polls = 3  # GETs a deleted pod stays readable (RP14)


STANDS: dict[str, type[Stand]] = {s.profile: s for s in (Local, GenericSsh, Lambda, Vast, RunPod)}
