"""How long `rgt run` takes to start a job on N nodes of a group box, N = 1, 2, 4 (issue 31:
"starting N nodes takes about as long as starting one"), beside what a user would otherwise do:
a loop over the hosts that, for each in turn, rsyncs the workdir and starts the command with
`ssh HOST 'nohup … &'`.

NEEDS ROOT: the hosts are network + UTS + pid + mount namespaces on one bridge
(tests/hosts.py), each with its own sshd (tests/sshd.py) and its own disk; exits 2 saying why
where that cannot be built. CPU seconds come from one cpuacct cgroup (v1) for the laptop side
and one per host; where those cannot be made the columns are left out.

    python bench/multinode_start.py                    # N = 1, 2, 4; 3 repetitions; 30 ms RTT
    python bench/multinode_start.py --repeat 5 --rtt-ms 50 --nodes 1,2,4,8
    python bench/multinode_start.py --phases           # also where rgt's time goes, per N

The laptop (this namespace) reaches every host across a round trip of --rtt-ms, as a user
reaches rented machines over the internet, while the hosts reach each other directly (one
datacenter). This kernel has no netem, so the delay is bench/netlink.py's other way: a TUN
pair per host (one end here, one in the host) with a userspace delay line in this process,
and a /32 route each way that sends laptop<->host traffic through it; host<->host traffic
stays on the bridge. No rate limit: the workdir is a few MB, the round trips are the cost.

The hosts' /root is an empty tmpfs by default (--root-home clean), as on a fresh rented box:
this machine's own .bashrc runs `pyenv init` in every ssh command's shell (0.44 s a command
over an open connection here, instead of 0.07) and puts pyenv's shims first on PATH.

The job is `sleep 30` in a SkyPilot task (`num_nodes: N`): it starts as written on every node,
as the loop's does (an rgt spec's plain line would start under torchrun, whose own start —
importing torch on every node — is the job's, not the launch's).

What is timed, from the same start:
- rgt: `rgt run BOX task.yaml -d` as a fresh process (it returns once every node's runner has
  written its state) — the ratios are of this figure; then `rgt watch BOX RUN --json` until
  every node says running, the time to that confirmation beside it;
- sequential: for each host in turn `rsync -a --mkpath WORK/ root@HOST:DIR/code/` then
  `ssh root@HOST 'cd DIR/code || exit 1; nohup sleep 30 > ../log 2>&1 < /dev/null & echo $!'`.
Every run is cancelled (`rgt cancel --yes`; the loop's sleeps killed by pid) before the next;
the hosts, their sshds and the delay lines are removed at the end, also after an error.
`--phases` runs one more `rgt run` per N with timers around rgt's launch steps (the bench
wraps them in the child process; rgt's code is not changed) and prints the timeline.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import hosts  # noqa: E402
from netlink import TUN_MTU, DelayLine  # noqa: E402

if TYPE_CHECKING:
    import sshd  # imported in main, after the check that this can run at all (it needs rgt)

DISK = "/srv/rgt-node"  # each host's own disk (a tmpfs only its processes see)
JOB_S = 30


# -- the network: laptop <-RTT-> each host, hosts side by side ------------------------------

class DelayedLan:
    """A delay of rtt_ms between this namespace and each host of `lan` (one TUN pair per
    host, bench/netlink.py's delay line for all); traffic between hosts keeps the bridge."""

    def __init__(self, lan: hosts.Lan, rtt_ms: float) -> None:
        self.lan, self.rtt_ms = lan, rtt_ms
        self._line = DelayLine(rtt_ms)

    def start(self) -> DelayedLan:
        tag = self.lan.bridge[-6:]
        try:
            for i, ns in enumerate(self.lan.namespaces):
                near, far = f"rgd{tag}{i}a"[:15], f"rgd{tag}{i}b"[:15]
                self._line.pair(near, far)
                run(["ip", "link", "set", far, "netns", ns])
                run(["ip", "link", "set", near, "mtu", str(TUN_MTU), "up"])
                run(["ip", "-n", ns, "link", "set", far, "mtu", str(TUN_MTU), "up"])
                # more specific than the bridge's /24: laptop<->host i goes through the TUNs
                run(["ip", "route", "add", f"{self.lan.address(i)}/32", "dev", near,
                     "src", self.lan.laptop])
                run(["ip", "-n", ns, "route", "add", f"{self.lan.laptop}/32", "dev", far,
                     "src", self.lan.address(i)])
        except BaseException:
            self.stop()
            raise
        self._line.start()
        return self

    def stop(self) -> None:
        self._line.stop()  # closing a TUN removes its device and its routes


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()[-500:]}")
    return done


class CpuMeter:
    """CPU seconds spent by the laptop side (rgt, its ssh clients and masters; rsync and ssh
    for the loop) and by each host (its sshd and all it starts), from one cpuacct cgroup
    each: a process put in one at its start keeps its descendants there. Empty figures where
    cgroup v1's cpuacct cannot be written."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self, names: list[str]) -> None:
        self.base = self.ROOT / f"rgt-bench-{os.getpid()}"
        self.dirs: dict[str, Path] = {}
        try:
            self.base.mkdir()
            for name in names:
                (self.base / name).mkdir()
                self.dirs[name] = self.base / name
        except OSError:
            self.stop()
            self.dirs = {}

    def wrap(self, name: str) -> list[str]:
        """argv prefix that runs the rest inside cgroup `name`."""
        if name not in self.dirs:
            return []
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.dirs[name] / "cgroup.procs")]

    def read(self) -> dict[str, float]:
        return {name: int((d / "cpuacct.usage").read_text()) / 1e9
                for name, d in self.dirs.items()}

    def stop(self) -> None:
        if not self.base.exists():
            return
        for d in [*self.base.iterdir(), self.base]:
            if not d.is_dir():
                continue
            with contextlib.suppress(OSError):  # what lingers (an ssh master) goes up a level
                for pid in (d / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.ROOT / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                d.rmdir()


def cpu_since(meter: CpuMeter, before: dict[str, float]) -> tuple[float, float]:
    """CPU seconds since `before`: (laptop + hosts, laptop alone)."""
    after = meter.read()
    return (sum(after[k] - before[k] for k in before),
            after["laptop"] - before["laptop"] if "laptop" in before else 0.0)


# -- the workdir ---------------------------------------------------------------------------

def make_workdir(root: Path, files: int, total_mb: float) -> int:
    """A project: mostly small source/config files, a few binary ones (a tokenizer, small
    weights) holding most of the bytes. Returns its size in bytes."""
    rng = random.Random(31)
    small = max(1, files - files // 20)
    words = [f"x{i}" for i in range(200)] + ["def", "return", "import", "self", "torch"]
    used = 0
    for i in range(small):
        path = root / f"pkg{i % 12}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(rng.randint(20, 120)))
        path.write_text(text + "\n")
        used += path.stat().st_size
    big = files - small
    left = max(0, int(total_mb * 1e6) - used)
    (root / "assets").mkdir(exist_ok=True)
    for i in range(big):
        (root / "assets" / f"blob{i}.bin").write_bytes(rng.randbytes(left // big))
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# -- rgt as the user runs it ----------------------------------------------------------------

PHASE_SHIM = r"""
import json, os, sys, threading, time
T0 = time.monotonic()
events = []
def timed(owner, name, label=None):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start, cpu = time.monotonic(), time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            what = label or name
            if name == "run" and len(args) > 1:
                what = "ssh: " + str(args[1])[:48].replace("\n", " ")
            if name == "put":
                what = "ssh: put (workdir push)"
            host = getattr(getattr(args[0], "target", None), "host", "") if args else ""
            events.append((what, time.thread_time() - cpu, host,
                           start - T0, time.monotonic() - T0))
    setattr(owner, name, wrapper)
import rgt.lifecycle.launch as L, rgt.lifecycle.census as C, rgt.lifecycle.fit as F
import rgt.platforms.ssh as P, rgt.remote.group as G
from rgt.transport import SshTransport
for owner, name in ((L, "refuse_second_launch"), (C, "refuse_strays"), (F, "check"),
                    (L, "prepare_home"), (L, "push"), (L, "ship_library"),
                    (P, "start_runner"), (P, "wait_for_state"), (G, "interface_env"),
                    (G, "on_every_node"), (SshTransport, "run"), (SshTransport, "put"),
                    (SshTransport, "close")):
    timed(owner, name)
import atexit
atexit.register(lambda: open(os.environ["BENCH_PHASES"], "w").write(json.dumps(
    {"events": events, "total": time.monotonic() - T0, "cpu": time.process_time()})))
sys.argv = ["rgt", *sys.argv[1:]]
from rgt.__main__ import main
main()
"""


class Rgt:
    def __init__(self, home: Path, meter: CpuMeter) -> None:
        self.env = {**os.environ, "RGT_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"}
        self.meter = meter

    def __call__(self, *args: str, check: bool = True, phases: Path | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = self.env
        argv = [sys.executable, "-m", "rgt", *args]
        if phases is not None:
            env = {**env, "BENCH_PHASES": str(phases)}
            argv = [sys.executable, "-c", PHASE_SHIM, *args]
        done = subprocess.run([*self.meter.wrap("laptop"), *argv], capture_output=True,
                              text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise RuntimeError(f"rgt {' '.join(args)} exited {done.returncode}:\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return done


def node_statuses(cli: Rgt, box: str, run_id: str) -> list[str]:
    got = json.loads(cli("watch", box, run_id, "--json").stdout)["run"]
    return [n["status"] for n in got.get("nodes") or []] or [got["status"]]


def rgt_start(cli: Rgt, box: str, spec: Path, n: int, *,
              phases: Path | None = None) -> tuple[float, float, tuple[float, float], str]:
    """(seconds until `rgt run -d` returned, until watch saw every node running, CPU seconds
    until it returned (all, laptop), run id)."""
    cpu0 = cli.meter.read()
    t0 = time.monotonic()
    started = cli("run", box, str(spec), "-d", phases=phases)
    returned = time.monotonic() - t0
    cpu = cpu_since(cli.meter, cpu0)
    run_id = started.stdout.strip().splitlines()[-1].strip()
    deadline = t0 + 120
    statuses: list[str] = []
    while time.monotonic() < deadline:
        statuses = node_statuses(cli, box, run_id)
        if len(statuses) == n and all(s == "running" for s in statuses):
            return returned, time.monotonic() - t0, cpu, run_id
        if any(s not in ("starting", "running", "launching") for s in statuses):
            break
        time.sleep(0.1)
    raise RuntimeError(f"run {run_id} on {box}: nodes {statuses}, not all running")


def rgt_cancel(cli: Rgt, box: str, run_id: str) -> None:
    cli("cancel", box, run_id, "--yes")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(s not in ("running", "starting") for s in node_statuses(cli, box, run_id)):
            return
        time.sleep(0.5)
    raise RuntimeError(f"run {run_id} on {box} still running after cancel")


# -- the peer: a loop over the hosts ---------------------------------------------------------

def ssh_words(server: sshd.SshServer, known_hosts: Path) -> list[str]:
    return ["ssh", "-p", str(server.port), "-i", str(server.client_key),
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes"]


def sequential_start(servers: list[sshd.SshServer], known_hosts: Path, work: Path,
                     tag: str, meter: CpuMeter
                     ) -> tuple[float, tuple[float, float], list[tuple[sshd.SshServer, int]]]:
    """(seconds, CPU seconds, what was started) of the user's loop over the hosts."""
    started = []
    cpu0 = meter.read()
    t0 = time.monotonic()
    for server in servers:
        words = ssh_words(server, known_hosts)
        where = f"{DISK}/manual/{tag}"
        run([*meter.wrap("laptop"), "rsync", "-a", "--mkpath", "-e", shlex.join(words),
             f"{work}/", f"root@{server.host}:{where}/code/"])
        out = run([*meter.wrap("laptop"), *words, f"root@{server.host}",
                   f"cd {where}/code || exit 1; nohup sleep {JOB_S} > ../log 2>&1 "
                   "< /dev/null & echo $!"])
        started.append((server, int(out.stdout.strip())))
    took = time.monotonic() - t0
    return took, cpu_since(meter, cpu0), started


def calibrate(server: sshd.SshServer, known_hosts: Path, scratch: Path) -> tuple[float, float]:
    """Median seconds of `ssh HOST true` on a fresh connection, and over an open master (as
    each of rgt's commands after the first): what one step costs on this link and load."""
    words, host = ssh_words(server, known_hosts), f"root@{server.host}"

    def timed(argv: list[str]) -> float:
        t0 = time.monotonic()
        run(argv)
        return time.monotonic() - t0
    fresh = statistics.median(timed([*words, host, "true"]) for _ in range(5))
    master = [*words, "-o", "ControlMaster=auto", "-o", f"ControlPath={scratch}/cm",
              "-o", "ControlPersist=30"]
    run([*master, host, "true"])
    try:
        shared = statistics.median(timed([*master, host, "true"]) for _ in range(5))
    finally:
        subprocess.run([*master, "-O", "exit", host], capture_output=True)
    return fresh, shared


def sequential_stop(started, known_hosts: Path) -> None:
    for server, pid in started:
        run([*ssh_words(server, known_hosts), f"root@{server.host}", f"kill {pid}"])


# -- the bench ----------------------------------------------------------------------------

def ssh_line(server: sshd.SshServer) -> str:
    return f"ssh -p {server.port} -i {server.client_key} root@{server.host}"


def phase_table(path: Path) -> str:
    """The timeline of one instrumented `rgt run`: each step's span (first start to last
    end across the nodes), how many calls, their summed time and the CPU time rgt's own
    process spent in them (its threads; not the ssh processes)."""
    got = json.loads(path.read_text())
    spans: dict[str, list[float]] = {}
    counts: collections.Counter[str] = collections.Counter()
    hosts_of: dict[str, set[str]] = collections.defaultdict(set)
    for what, cpu, host, start, end in got["events"]:
        span = spans.setdefault(what, [start, end, 0.0, 0.0])
        span[0], span[1] = min(span[0], start), max(span[1], end)
        span[2] += end - start
        span[3] += cpu
        counts[what] += 1
        hosts_of[what].add(host)
    lines = [f"    {'from':>6} {'to':>6}  {'calls':>5} {'hosts':>5} {'sum s':>6} {'cpu s':>6}"
             "  step"]
    for what, (start, end, total, cpu) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        lines.append(f"    {start:6.2f} {end:6.2f}  {counts[what]:5d} "
                     f"{len(hosts_of[what] - {''}):5d} {total:6.2f} {cpu:6.2f}  {what}")
    lines.append(f"    rgt's process: {got['total']:.2f} s after its imports, "
                 f"{got['cpu']:.2f} CPU-s in all (imports included)")
    # each node's chain: its ssh commands one after another (a parallel start has N chains
    # of the same length, each as long as N=1's; longer ones mean each step got slower)
    chain: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for what, _cpu, host, start, end in got["events"]:
        if what.startswith("ssh: ") and host:
            chain[host][0] += 1
            chain[host][1] += end - start
    for host, (calls, total) in sorted(chain.items()):
        lines.append(f"    {host}: {calls} ssh calls, {total:.2f} s in them, "
                     f"{total / calls:.2f} s each")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1,2,4", help="comma-separated node counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rtt-ms", type=float, default=30.0,
                    help="laptop<->host round trip (0: the bridge as it is)")
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--mb", type=float, default=4.0, help="workdir size in MB")
    ap.add_argument("--phases", action="store_true",
                    help="one more instrumented rgt run per N, its steps' timeline printed")
    ap.add_argument("--keep", type=Path, help="leave the scratch directory here")
    ap.add_argument("--root-home", choices=("clean", "this"), default="clean",
                    help="the hosts' /root: an empty one, as on a fresh rented box (default), "
                         "or this machine's (whose .bashrc runs `pyenv init` in every ssh "
                         "command's shell and puts pyenv's shims before /usr/bin/python3)")
    args = ap.parse_args()
    counts = sorted({int(n) for n in args.nodes.split(",")})
    why = hosts.unavailable()
    if why:
        print(f"multinode_start: needs root and network namespaces: {why}", file=sys.stderr)
        return 2
    global sshd
    import sshd
    why = sshd.unavailable() or \
        (None if shutil.which("rsync") else "rsync is not installed (the sequential peer)")
    if why:
        print(f"multinode_start: needs root, network namespaces, sshd and rsync: {why}",
              file=sys.stderr)
        return 2
    if counts[0] < 1:
        print("multinode_start: --nodes takes counts >= 1", file=sys.stderr)
        return 2

    scratch = Path(tempfile.mkdtemp(prefix="rgt-multinode-"))
    lan = hosts.Lan(max(counts), private=[DISK, *(["/root"] if args.root_home == "clean" else [])])
    meter = CpuMeter(["laptop", *(f"host{i}" for i in range(lan.count))])
    delay = None
    servers: list[sshd.SshServer] = []
    try:
        lan.start()
        if args.rtt_ms > 0:
            delay = DelayedLan(lan, args.rtt_ms).start()
        keys = sshd.SshKeys.generate(scratch / "keys")
        for i in range(lan.count):
            # tmux's socket lives in /tmp, which the hosts share: each its own, on its disk
            servers.append(sshd.SshServer(
                scratch / f"sshd{i}", keys, port=2222, host=lan.address(i),
                exec_prefix=[*meter.wrap(f"host{i}"), *lan.exec_prefix(i)],
                extra_config=f"SetEnv TMUX_TMPDIR={DISK}").start())
        known = scratch / "known_hosts"  # the user's, holding every host already
        for server in servers:
            key = Path(f"{server.host_key}.pub").read_text().split()
            with known.open("a") as f:
                f.write(f"[{server.host}]:{server.port} {key[0]} {key[1]}\n")
        run([*ssh_words(servers[0], known), f"root@{servers[0].host}", "true"])
        work = scratch / "project"
        size = make_workdir(work, args.files, args.mb)
        cli = Rgt(scratch / "rgt-home", meter)
        specs = {}
        for n in counts:
            ssh = [w for s in servers[:n] for w in ("--ssh", ssh_line(s))]
            cli("up", f"n{n}", "--profile", "generic-ssh", *ssh,
                "--data-dir", f"{DISK}/n{n}/data", "--durable-dir", f"{DISK}/n{n}/durable",
                "--rate", "1")
            # a SkyPilot task: its `run` starts as written on every node, as the loop's does
            # (an rgt spec's plain line would start under torchrun, whose start is the job's)
            spec = work / f"start{n}.yaml"
            spec.write_text(f"name: start{n}\nworkdir: .\nnum_nodes: {n}\n"
                            f"run: sleep {JOB_S}\n")
            specs[n] = spec
        fresh, shared = calibrate(servers[0], known, scratch)
        print(f"{lan.count} hosts on {lan.prefix}.0/24, laptop<->host RTT "
              f"{args.rtt_ms:g} ms ({'TUN delay line' if delay else 'none'}); workdir "
              f"{args.files} files, {size / 1e6:.1f} MB; job `sleep {JOB_S}`; "
              f"{os.cpu_count()} CPUs (load {os.getloadavg()[0]:.1f}); {args.repeat} "
              f"repetitions\n`ssh HOST true`: {fresh:.2f} s on a fresh connection, "
              f"{shared:.2f} s over an open master", flush=True)

        # one untimed warm-up of each (page cache, the boxes' first launch)
        for n in counts:
            *_, rid = rgt_start(cli, f"n{n}", specs[n], n)
            rgt_cancel(cli, f"n{n}", rid)
        *_, warm = sequential_start(servers[:1], known, work, "warmup", meter)
        sequential_stop(warm, known)

        figures: dict[int, dict[str, list[float]]] = {
            n: {k: [] for k in ("run", "running", "cpu", "cpu_laptop", "seq", "seq_cpu")}
            for n in counts}
        for rep in range(args.repeat):
            for n in counts:  # interleaved, so a slow spell of the shared cores hits both
                returned, running, (cpu, cpu_laptop), rid = rgt_start(cli, f"n{n}", specs[n], n)
                rgt_cancel(cli, f"n{n}", rid)
                seq, (seq_cpu, _), started = sequential_start(servers[:n], known, work,
                                                              f"n{n}r{rep}", meter)
                sequential_stop(started, known)
                for key, value in (("run", returned), ("running", running), ("cpu", cpu),
                                   ("cpu_laptop", cpu_laptop), ("seq", seq),
                                   ("seq_cpu", seq_cpu)):
                    figures[n][key].append(value)
                print(f"  rep {rep + 1} N={n}: rgt run {returned:.2f} s ({cpu:.2f} CPU-s, "
                      f"{cpu_laptop:.2f} of them on the laptop), "
                      f"all running {running:.2f} s; sequential {seq:.2f} s "
                      f"({seq_cpu:.2f} CPU-s); load {os.getloadavg()[0]:.1f}", flush=True)

        med = {n: {k: statistics.median(v) for k, v in f.items()} for n, f in figures.items()}
        base = med[counts[0]]
        print(f"\nmedian of {args.repeat}; seconds (CPU seconds, laptop + hosts, beside)")
        print("| N | `rgt run -d` | rgt, watch sees all running | sequential loop | "
              f"rgt N / rgt {counts[0]} | sequential / rgt |")
        print("| --- | --- | --- | --- | --- | --- |")
        for n in counts:
            m = med[n]
            cpu = f" ({m['cpu']:.2f})" if meter.dirs else ""
            seq_cpu = f" ({m['seq_cpu']:.2f})" if meter.dirs else ""
            print(f"| {n} | {m['run']:.2f}{cpu} | {m['running']:.2f} | {m['seq']:.2f}{seq_cpu}"
                  f" | {m['run'] / base['run']:.2f}× | {m['seq'] / m['run']:.2f}× |")
        if meter.dirs:
            print("rgt's CPU seconds on the laptop side (rgt, its ssh clients and masters): "
                  + ", ".join(f"N={n} {med[n]['cpu_laptop']:.2f}" for n in counts))

        if args.phases:
            for n in counts:
                path = scratch / f"phases{n}.json"
                *_, rid = rgt_start(cli, f"n{n}", specs[n], n, phases=path)
                rgt_cancel(cli, f"n{n}", rid)
                print(f"\nN={n}: one instrumented `rgt run -d` (seconds from its start)")
                print(phase_table(path))
        return 0
    finally:
        for server in servers:
            server.stop()
        if delay is not None:
            delay.stop()
        lan.stop()
        meter.stop()
        if args.keep:
            shutil.copytree(scratch, args.keep, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
