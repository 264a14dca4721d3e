"""A real one-node Slurm cluster (munged + slurmctld + slurmd) in a temp dir, for tests.

Import it from any test folder (``tests/`` is on sys.path, see tests/conftest.py)::

    cluster = SlurmCluster(workdir).start()     # raises ClusterError with the daemon logs
    subprocess.run(["sinfo"], env=cluster.env)  # every Slurm command needs cluster.env
    cluster.stop()

Nothing is installed: it uses the Debian slurm-wlm and munge packages as they are, with a
generated munge key on a private socket and a generated slurm.conf (SLURM_CONF points at it),
so it never touches /etc/slurm or the system munged. Needs root (slurmd runs jobs as the
submitting user; SlurmUser=root). `unavailable()` says why it cannot run here.

The cluster is configured for fast tests: KillWait=5, a 1 s scheduler interval, the job
completion log (`JobCompType=jobcomp/filetxt`) instead of slurmdbd, JobRequeue=1, and memory
enforcement by polling (`JobAcctGatherParams=OverMemoryKill`) since cgroups may be missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "sinfo",
            "scancel")


class ClusterError(RuntimeError):
    """The cluster did not come up; the message carries the daemons' log tails."""


def unavailable() -> str | None:
    """Why a private Slurm cluster cannot run here, or None if it can."""
    missing = [b for b in BINARIES if shutil.which(b) is None
               and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        return f"Slurm/munge binaries missing: {', '.join(missing)}"
    if os.geteuid() != 0:
        return "a private Slurm cluster needs root (slurmd runs jobs as their user)"
    return None


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_hardware() -> tuple[int, int]:
    """(CPUs, RealMemory MB) as `slurmd -C` sees this host, memory trimmed a little."""
    cpus, mem = os.cpu_count() or 1, 1024
    try:
        out = subprocess.run([_binary("slurmd"), "-C"], capture_output=True, text=True,
                             timeout=30).stdout
        fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
        cpus = int(fields.get("CPUs", cpus))
        mem = int(fields.get("RealMemory", mem))
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return cpus, max(256, int(mem * 0.9))


class SlurmCluster:
    def __init__(self, root: Path, *, kill_wait: int = 5) -> None:
        self.root = Path(root)
        self.kill_wait = kill_wait
        self.host = socket.gethostname().split(".")[0]
        self.cpus, self.memory_mb = node_hardware()
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.jobcomp = self.root / "jobcomp.log"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for var in [k for k in self.env if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if var != "SLURM_CONF":
                self.env.pop(var)

    # --- configuration -------------------------------------------------------------------

    def slurm_conf(self) -> str:
        r = self.root
        return "\n".join([
            "ClusterName=rgttest",
            f"SlurmctldHost={self.host}",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # cred_expire also sets how long a requeued job waits before it may start again
            # (120 s by default): keep the requeue tests fast.
            f"AuthInfo=socket={self.munge_socket},cred_expire=10",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd.pid",
            f"SlurmctldLogFile={r}/slurmctld.log",
            f"SlurmdLogFile={r}/slurmd.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "DefMemPerCPU=512",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp}",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=task=1",
            "JobAcctGatherParams=OverMemoryKill",
            "ReturnToService=2",
            f"KillWait={self.kill_wait}",
            "MinJobAge=300",
            "JobRequeue=1",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1,bf_interval=1,defer_batch",
            "MessageTimeout=20",
            "SlurmdTimeout=300",
            "InactiveLimit=0",
            "MpiDefault=none",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
            f"RealMemory={self.memory_mb} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=NO",
            "",
        ])

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 60) -> SlurmCluster:
        reason = unavailable()
        if reason:
            raise ClusterError(reason)
        for sub in ("state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        os.chmod(self.root / "munge", 0o700)
        self.conf.write_text(self.slurm_conf())
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", [_binary("munged"), "-F", "--force",
                               f"--key-file={key}", f"--socket={self.munge_socket}",
                               f"--pid-file={self.root}/munge/munged.pid",
                               f"--seed-file={self.root}/munge/munged.seed",
                               f"--log-file={self.root}/munge/munged.log"])
        self._wait(lambda: self.munge_socket.exists(), 15, "munged did not create its socket")
        self._spawn("slurmctld", [_binary("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self.cmd("scontrol", "ping", check=False).returncode == 0, timeout,
                   "slurmctld did not answer `scontrol ping`")
        self._spawn("slurmd", [_binary("slurmd"), "-D", "-f", str(self.conf)])
        self._wait(self._node_idle, timeout, "the node never became idle in sinfo")
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.root / f"{name}.stdout", "wb")  # noqa: SIM115 - lives with the process
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)

    def _node_idle(self) -> bool:
        out = self.cmd("sinfo", "-h", "-N", "-o", "%T", check=False).stdout
        return out.strip().rstrip("*") in ("idle", "mixed", "allocated")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ClusterError(f"{name} exited with {proc.returncode}\n{self.logs()}")
            if ready():
                return
            time.sleep(0.3)
        raise ClusterError(f"{what} within {timeout:.0f} s\n{self.logs()}")

    def logs(self, lines: int = 15) -> str:
        parts = []
        for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.stdout")) + [
                self.root / "munge" / "munged.log"]:
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def cmd(self, *argv: str, check: bool = True, timeout: float = 30
            ) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=timeout, check=check)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cmd("scancel", "--user=root", check=False, timeout=10)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def wait_for_job(self, job_id: str, timeout: float = 120) -> str:
        """Block until the job (every array task) has left squeue; return jobcomp lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.cmd("squeue", "-h", "-j", job_id, "-o", "%i %T", check=False).stdout
            if not out.strip():
                return self.jobcomp.read_text() if self.jobcomp.exists() else ""
            time.sleep(1)
        raise TimeoutError(f"job {job_id} still queued after {timeout:.0f} s: {out}")
