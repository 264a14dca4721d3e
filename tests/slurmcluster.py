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

`SlurmCluster(root, nodes=N)` (N >= 2) is a multi-node cluster: N hosts of a `hosts.Lan`, each
a network + UTS namespace with its own hostname (node0, node1, ...) and address, each running
its own slurmd (`NodeName=node0 NodeAddr=10.x.y.1`), and one slurmctld in this namespace,
which the hosts reach at the Lan's laptop address. The filesystem is shared, as a cluster's
is: munge's socket is a file, and the run directories are the same on every node. Each host
sees a generated /etc/hosts (bind-mounted in its own mount namespace) that resolves every node
name, as a cluster's DNS does: `scontrol show hostnames` gives names, and torchrun, gloo and a
user's launch line dial them. `crash_node(i)` kills everything on host i (its slurmd, the job's
processes there) as a machine that dies; `boot_node(i)` starts its slurmd again.
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


def _cgroup_mounts() -> list[str]:
    """Shell lines that mount this machine's cgroup hierarchies again under /sys/fs/cgroup:
    `ip netns exec` mounts a fresh /sys for the namespace, without them, and slurmd will not
    start without a cgroup filesystem (even with proctrack/linuxproc and task/none)."""
    lines = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, kind, options, *_ = line.split()
        if where == "/sys/fs/cgroup" or where.startswith("/sys/fs/cgroup/"):
            if kind not in ("tmpfs", "cgroup", "cgroup2"):
                continue
            make = "" if where == "/sys/fs/cgroup" else f"mkdir -p {where} && "
            lines.append(f"{make}mount -t {kind} -o {options} {kind} {where}")
    return lines


class SlurmCluster:
    def __init__(self, root: Path, *, kill_wait: int = 5, nodes: int = 1,
                 node_timeout: int = 5, gpus: int = 0) -> None:
        self.root = Path(root)
        self.kill_wait = kill_wait
        self.node_timeout = node_timeout  # SlurmdTimeout with several nodes
        # GPUs each node declares (several nodes; 0 or 1): counted, not real (/dev/null is the
        # device), so a task that asks for a GPU is scheduled and told so, and runs on the CPU
        if gpus not in (0, 1):
            raise ValueError("a test node declares at most one (pretend) GPU")
        self.gpus = gpus
        self.host = socket.gethostname().split(".")[0]
        self.lan = None
        if nodes > 1:
            from hosts import Lan

            self.lan = Lan(nodes)
        # the node names `sinfo` and `scontrol show hostnames` give
        self.nodes = list(self.lan.hostnames) if self.lan else [self.host]
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
        if self.lan is None:
            controller, slurmd_files = self.host, ("slurmd.pid", "slurmd.log", "spool")
            node_lines = [f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
                          f"RealMemory={self.memory_mb} State=UNKNOWN"]
        else:
            # the nodes reach the controller at the laptop's address on their LAN; each
            # slurmd has files of its own (%n: its node name)
            controller = f"{self.host}({self.lan.laptop})"
            slurmd_files = ("slurmd-%n.pid", "slurmd-%n.log", "spool/%n")
            gres = f" Gres=gpu:{self.gpus}" if self.gpus else ""
            node_lines = [f"NodeName={name} NodeAddr={self.lan.address(i)} CPUs={self.cpus} "
                          f"RealMemory={self.memory_mb}{gres} State=UNKNOWN"
                          for i, name in enumerate(self.nodes)]
            if self.gpus:
                node_lines.insert(0, "GresTypes=gpu")
        return "\n".join([
            "ClusterName=rgttest",
            f"SlurmctldHost={controller}",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # cred_expire also sets how long a requeued job waits before it may start again
            # (120 s by default): keep the requeue tests fast.
            f"AuthInfo=socket={self.munge_socket},cred_expire={10 if self.lan is None else 5}",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/{slurmd_files[2]}",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/{slurmd_files[0]}",
            f"SlurmctldLogFile={r}/slurmctld.log",
            f"SlurmdLogFile={r}/{slurmd_files[1]}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            # a distributed job's launcher and worker on a node take more than 512M
            f"DefMemPerCPU={512 if self.lan is None else 2048}",
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
            # A node that dies is DOWN (its jobs NODE_FAIL) once it has not answered for
            # SlurmdTimeout and the controller's ping to it has timed out (MessageTimeout):
            # short with several nodes, so a test that kills one does not wait minutes.
            f"MessageTimeout={20 if self.lan is None else self.node_timeout}",
            f"SlurmdTimeout={300 if self.lan is None else self.node_timeout}",
            "InactiveLimit=0",
            "MpiDefault=none",
            *node_lines,
            f"PartitionName=debug Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE "
            "State=UP OverSubscribe=NO",
            "",
        ])

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 60) -> SlurmCluster:
        reason = unavailable()
        if reason:
            raise ClusterError(reason)
        spools = [f"spool/{n}" for n in self.nodes] if self.lan else []
        for sub in ("state", "spool", "munge", *spools):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        os.chmod(self.root / "munge", 0o700)
        self.conf.write_text(self.slurm_conf())
        if self.gpus:
            # one device file per GPU is how slurmd counts them; /dev/null stands for one
            (self.root / "gres.conf").write_text("Name=gpu File=/dev/null\n")
        if self.lan is not None:  # first: the controller's address is on the LAN's bridge
            self.hosts_file.write_text(self.hosts_text())
            self.lan.start()
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
        if self.lan is None:
            self._spawn("slurmd", [_binary("slurmd"), "-D", "-f", str(self.conf)])
            self._wait(self._node_idle, timeout, "the node never became idle in sinfo")
            return self
        for i in range(len(self.nodes)):
            self.boot_node(i, timeout=0)
        self._wait(self._node_idle, timeout, "the nodes never all became idle in sinfo")
        return self

    # --- several nodes ---------------------------------------------------------------------

    @property
    def hosts_file(self) -> Path:
        return self.root / "hosts"

    def hosts_text(self) -> str:
        """/etc/hosts as every node sees it: each node's name at its own LAN address."""
        lines = ["127.0.0.1 localhost"]
        lines += [f"{self.lan.address(i)} {name}" for i, name in enumerate(self.nodes)]
        return "\n".join(lines) + "\n"

    def boot_node(self, i: int, timeout: float = 60) -> None:
        """Start host i's slurmd (again, after `crash_node`), on that host: its network, its
        hostname, the cluster's /etc/hosts; with a timeout, wait until the node is idle."""
        name = self.nodes[i]
        mount = " && ".join([*_cgroup_mounts(), f"mount --bind {self.hosts_file} /etc/hosts",
                             'exec "$@"'])
        self._spawn(f"slurmd-{name}", [*self.lan.exec_prefix(i), "sh", "-c", mount, "node",
                                       _binary("slurmd"), "-D", "-N", name, "-f",
                                       str(self.conf)])
        if timeout:
            self._wait(lambda: self.node_state(name) == "idle", timeout,
                       f"{name} never became idle again")

    def crash_node(self, i: int) -> list[int]:
        """Host i dies: every process on it (its slurmd, slurmstepd, the job's processes
        there) is killed at once, as a machine that loses power. Returns the pids killed."""
        proc = self.procs.pop(f"slurmd-{self.nodes[i]}", None)
        killed = []
        for pid in self.node_processes(i):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        if proc is not None:
            proc.wait(timeout=15)
        return killed

    def node_processes(self, i: int) -> dict[int, str]:
        """pid → command line of every process on host i."""
        found = {}
        pids = subprocess.run(["ip", "netns", "pids", self.lan.namespaces[i]],
                              capture_output=True, text=True).stdout.split()
        for pid in pids:
            with contextlib.suppress(OSError, ValueError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                found[int(pid)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
        return found

    def node_state(self, name: str) -> str:
        out = self.cmd("sinfo", "-h", "-n", name, "-N", "-o", "%T", check=False).stdout
        return out.strip().rstrip("*~#")

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.root / f"{name}.stdout", "wb")  # noqa: SIM115 - lives with the process
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)

    def _node_idle(self) -> bool:
        out = self.cmd("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split()
        return len(out) == len(self.nodes) and all(
            state.rstrip("*") in ("idle", "mixed", "allocated") for state in out)

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
        """Everything goes, whatever got started (also after a failed `start`): the jobs, the
        daemons, and the hosts' namespaces with whatever still runs in them."""
        with contextlib.suppress(Exception):
            if "slurmctld" in self.procs:
                self.cmd("scancel", "--user=root", check=False, timeout=10)
        slurmds = [name for name in self.procs if name.startswith("slurmd")]
        for name in (*slurmds, "slurmctld", "munged"):
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
        if self.lan is not None:
            self.lan.stop()

    def wait_for_job(self, job_id: str, timeout: float = 120) -> str:
        """Block until the job (every array task) has left squeue; return jobcomp lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.cmd("squeue", "-h", "-j", job_id, "-o", "%i %T", check=False).stdout
            if not out.strip():
                return self.jobcomp.read_text() if self.jobcomp.exists() else ""
            time.sleep(1)
        raise TimeoutError(f"job {job_id} still queued after {timeout:.0f} s: {out}")
