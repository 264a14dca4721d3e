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
    xdist_group: ClassVar[str | None] = None  # tests/conftest.py: one worker per shared stand

    def __init__(self, request: Any, tmp: Path) -> None:
        self.request, self.tmp = request, tmp
        self.env: dict[str, str] = {}  # what the CLI needs beyond the fixtures' environment

    def after_launch(self, run_id: str) -> None:
        """What the user does between `rgt run` and the run's start (a notebook to run)."""

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
    why_not = {"lost_create": NO_CREATE,
               "hand_registered": "its `rgt up` is a hand registration (--ssh): the "
                                  "verbs-in-order case takes that box down",
               "slow_release": "rgt cannot release a box rented by hand (the user does, in "
                               "the provider's console): nothing for rgt to wait on"}

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
        # a terminated pod stays readable for a few GETs (RP14): live until it answers 404
        return list(self.fake.pods)

    def destroy_calls(self) -> list[Any]:
        return [c for c in self.fake.calls("DELETE", "/v2/pods/")
                + self.fake.calls("POST", "/v2/pods/") if not c.path.endswith("/pods")]

    def lose_create_answer(self) -> None:
        self.fake.fail_after("POST", "/v2/pods", 0)

    def confirm_slowly(self) -> None:
        self.fake.delete_polls = 3  # GETs a deleted pod stays readable (RP14)


class Slurm(Stand):
    """This machine as the login node of the private one-node cluster (tests/slurmcluster.py)."""
    profile = "slurm"
    xdist_group = "slurm"
    why_not = {"lost_create": NO_CREATE,
               "hand_registered": "the login node is registered, never created: the "
                                  "verbs-in-order case takes that registration down",
               "slow_release": "release is scancel of live jobs, final when it returns: "
                               "no instance whose going is confirmed"}

    def __init__(self, request: Any, tmp: Path) -> None:
        super().__init__(request, tmp)
        request.getfixturevalue("slurm_env")  # SLURM_CONF for the CLI

    def up_args(self) -> list[str]:
        return ["--profile", "slurm", "--durable-dir", str(self.tmp / "shared")]


class Kubernetes(Stand):
    """The fake API server with a cluster of this machine's processes behind it
    (tests/kubernetes/fakes), reached by kubeconfig."""
    profile = "kubernetes"
    xdist_group = "kubernetes"
    why_not = {"lost_create": "not covered yet: the fake Kubernetes API cannot drop an answer",
               "hand_registered": "a cluster is reached by kubeconfig: no box to register "
                                  "with --ssh",
               "slow_release": "release deletes the Jobs, pods and the PVC rgt made without "
                               "polling for them: nothing confirmed late to wait for"}

    def __init__(self, request: Any, tmp: Path) -> None:
        super().__init__(request, tmp)
        request.getfixturevalue("kube")  # KUBECONFIG for the CLI

    def up_args(self) -> list[str]:
        from kubekit import IMAGE

        return ["--profile", "kubernetes", "--image", IMAGE, "--disk", "1", "--mount-path",
                str(self.tmp / "mnt" / "checkpoints")]


class Kaggle(Stand):
    """The official kaggle client against tests/notebooks/fake_kaggle.py."""
    profile = "kaggle"
    why_not = {"lost_create": "no create call at `rgt up` (it checks the credentials): a "
                              "kernel is pushed per run",
               "hand_registered": "no --ssh box: Kaggle is reached through its API",
               "slow_release": "down deletes nothing on Kaggle (it names what stays in the "
                               "account): nothing to confirm"}

    def __init__(self, request: Any, tmp: Path) -> None:
        from fake_kaggle import FakeKaggle, client_env

        super().__init__(request, tmp)
        fake = FakeKaggle(tmp / "kaggle")
        fake.__enter__()
        request.addfinalizer(lambda: fake.__exit__(None, None, None))
        self.env = client_env(fake, tmp)

    def up_args(self) -> list[str]:
        return ["--profile", "kaggle"]


class Colab(Stand):
    """A Drive folder and a stand-in runtime that runs rgt's notebook with nbclient
    (tests/notebooks/colabkit.py): the user's part, opening and running it, is after_launch."""
    profile = "colab"
    why_not = {"lost_create": "no create call: `rgt up` registers a Drive folder",
               "hand_registered": "no --ssh box: a runtime the user opens in the browser",
               "slow_release": "Colab has no API rgt calls to release: nothing to confirm"}

    def __init__(self, request: Any, tmp: Path) -> None:
        from colabkit import ColabVM

        super().__init__(request, tmp)
        self.vm = ColabVM(tmp, delay_s=0.05)  # its Drive: tmp/drive-cloud

    def up_args(self) -> list[str]:
        return ["--profile", "colab", "--drive", str(self.vm.cloud)]

    def after_launch(self, run_id: str) -> None:
        import json

        (notebook,) = (self.vm.cloud / "rgt" / run_id).glob("*.ipynb")
        self.vm.execute(json.loads(notebook.read_text()))


STANDS: dict[str, type[Stand]] = {s.profile: s for s in (
    Local, GenericSsh, Lambda, Vast, RunPod, Slurm, Kubernetes, Kaggle, Colab)}
