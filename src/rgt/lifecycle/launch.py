"""`rgt run`: push the workdir, hand over secrets on stdin, launch the job detached.

The job runs under the on-box runner (`rgt.onbox.runner`), which owns `state.json`, the log,
signal forwarding and the verified copy of outputs to the durable tier. Each run gets its own
directory, so a new launch never rewrites a script a live run is reading (principle 6).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import time
from dataclasses import dataclass

from rgt.errors import UserError
from rgt.lifecycle.boxes import transport_for
from rgt.lifecycle.onbox import write_file
from rgt.lifecycle.watch import refresh
from rgt.onbox import script_source
from rgt.platforms import platform_for
from rgt.profiles import Profile, load_profile
from rgt.spec import JobSpec, drop_torch_installs
from rgt.store import LIVE, Box, Run, Store
from rgt.transport import Transport


@dataclass
class Layout:
    """Where one run lives on the box (DESIGN: everything of a run under <DATA_DIR>/rgt/<id>)."""

    run_dir: str
    durable_run_dir: str

    @classmethod
    def of(cls, box: Box, run_id: str) -> Layout:
        return cls(f"{box.data_dir}/rgt/{run_id}", f"{box.durable_dir}/rgt/{run_id}")

    @property
    def run_id(self) -> str:
        return self.run_dir.rsplit("/", 1)[-1]

    @property
    def code(self) -> str:
        return f"{self.run_dir}/code"

    @property
    def ckpt(self) -> str:
        return f"{self.durable_run_dir}/ckpt"

    @property
    def out(self) -> str:
        return f"{self.durable_run_dir}/out"


def new_run_id(job: str) -> str:
    return f"{job}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def secret_values(spec: JobSpec) -> bytes:
    """KEY=VALUE lines for the secrets the spec names, read from this machine's environment."""
    missing = [name for name in spec.secrets if not os.environ.get(name)]
    if missing:
        raise UserError(f"the job needs secrets that are not set here: {', '.join(missing)}; "
                        "export them in this shell (their values travel to the box on stdin)")
    lines = []
    for name in spec.secrets:
        value = os.environ[name]
        if "\n" in value:
            raise UserError(f"secret {name} contains a newline; store it as a single line")
        lines.append(f"{name}={value}")
    return ("\n".join(lines) + "\n").encode() if lines else b""


def job_environment(spec: JobSpec, profile: Profile, layout: Layout) -> dict:
    env = dict(profile.network.mirror_env)
    if "HF_HOME" in profile.overrides and "{" not in profile.overrides["HF_HOME"]:
        env["HF_HOME"] = profile.overrides["HF_HOME"].split()[0]
    env.update(spec.env)
    env.update({"RGT_RUN_ID": layout.run_id, "RGT_RUN_DIR": layout.run_dir,
                "RGT_CKPT_DIR": layout.ckpt, "RGT_DURABLE_DIR": layout.durable_run_dir,
                "RGT_OUT_DIR": layout.out})
    return env


def refuse_second_launch(store: Store, box: Box, spec: JobSpec, transport: Transport) -> None:
    # The store's status is what the last watch saw; ask the box before calling a run live.
    claimed = [r for r in store.runs(box.name) if r.job == spec.name and r.status in LIVE]
    live = [r for r in claimed if refresh(store, box, r, transport)["status"] in LIVE]
    if live:
        raise UserError(f"job {spec.name!r} already has a live run on {box.name} ({live[0].id}); "
                        f"watch it with `rgt watch {box.name} {live[0].id}` — a second launch "
                        "would race it for the same checkpoints")


def launch(store: Store, box_name: str, spec: JobSpec, *, after: str | None = None,
           progress=None) -> tuple[Run, list[str]]:
    """Push, hand over secrets, start detached. Returns the run and any notes for the user.

    `after` names an earlier run of the same box: this one starts only once that one
    succeeded (a scheduler dependency; only platforms with a scheduler can chain stages).
    """
    box = store.box(box_name)
    if box.state != "up":
        raise UserError(f"box {box_name!r} is down; register a new one with `rgt up`")
    profile = load_profile(box.profile)
    platform = platform_for(box.profile)
    scheduled = platform is not None and hasattr(platform, "launch")
    if (spec.grid or after) and not hasattr(platform, "dependency_on"):
        what = "a sweep (`grid`)" if spec.grid else "--after"
        raise UserError(f"{what} needs a scheduler (the slurm profile's job arrays and "
                        f"dependencies); on a {box.profile} box, run one job per cell")
    dependency = platform.dependency_on(store.run(box.name, after)) if after else None
    notes: list[str] = []
    setup = spec.setup
    if profile.launch.env_contract.pip_install_torch_forbidden:
        setup, dropped = drop_torch_installs(setup)
        if dropped:
            notes.append(f"dropped {', '.join(dropped)} from setup: this image's PyTorch is the "
                         "environment (AD9/LAM7)")
    secret_bytes = secret_values(spec)
    run_id = new_run_id(spec.name)
    layout = Layout.of(box, run_id)
    spec = spec.model_copy(update={"setup": setup})
    transport = transport_for(box)
    try:
        refuse_second_launch(store, box, spec, transport)
        push(store, transport, box, spec, layout, secret_bytes, progress=progress)
        if scheduled:
            # e.g. Slurm: sbatch replaces the detached runner; `platform_run` in the run record
            # tells watch to ask the platform, not the on-box probe.
            detach, platform_run = platform.launch(transport, box, spec, layout,
                                                   dependency=dependency)
            status, extra = "starting", {"platform_run": platform_run}
        else:
            detach = start_runner(transport, profile, spec, layout)
            status, extra = wait_for_state(transport, layout).get("status", "starting"), {}
            if detach == "setsid" and profile.facts.detach_primitive.startswith("tmux"):
                notes.append("no tmux on the box: the run is detached with setsid instead (it "
                             "outlives this connection all the same; `rgt watch` follows it)")
    finally:
        transport.close()
    now = time.time()
    run = Run(id=run_id, box=box.name, job=spec.name, remote_dir=layout.run_dir,
              spec={**spec.model_dump(mode="json"), "durable_run_dir": layout.durable_run_dir,
                    "detach": detach, **extra},
              status=status, exit_code=None, created=now, updated=now)
    store.add_run(run)
    store.record("run", {"detach": detach, "status": run.status, "notes": notes},
                 box=box.name, run=run_id)
    return run, notes


def push(store: Store, transport: Transport, box: Box, spec: JobSpec, layout: Layout,
         secret_bytes: bytes, *, progress=None) -> None:
    """The workdir to RUN_DIR/code (resumable), then the secrets file (0600, from stdin)."""
    stats = transport.put(spec.workdir, layout.code, exclude=list(spec.exclude),
                          progress=progress)
    store.record("push", {"bytes_sent": stats.bytes_sent, "files": stats.files,
                          "seconds": stats.seconds, "attempts": stats.attempts},
                 box=box.name, run=layout.run_id)
    if secret_bytes:
        write_file(transport, f"{layout.run_dir}/secrets.env", secret_bytes)


def start_runner(transport: Transport, profile: Profile, spec: JobSpec, layout: Layout) -> str:
    """Hand the job to the on-box runner, detached; returns how it was detached."""
    run_json = {
        "run_id": layout.run_id,
        "command": spec.run,
        "setup": spec.setup,
        "workdir": layout.code,
        "env": job_environment(spec, profile, layout),
        "proxy_hook": profile.network.proxy_hook,
        "outputs": spec.outputs,
        "durable_dir": layout.out,
        "heartbeat_s": 5,
    }
    write_file(transport, f"{layout.run_dir}/run.json", json.dumps(run_json).encode())
    write_file(transport, f"{layout.run_dir}/runner.py", script_source("runner"))
    # What a relaunch after a container restart starts the runner with (vast.ai's onstart).
    write_file(transport, f"{layout.run_dir}/interpreter", f"{transport.python}\n".encode())
    transport.run(f"mkdir -p {shlex.quote(layout.ckpt)}", timeout=30)
    return start_detached(transport, profile, layout)


def start_detached(transport: Transport, profile: Profile, layout: Layout) -> str:
    """Start the runner so it outlives this connection: tmux if the box has it, else setsid."""
    runner = (f"{shlex.quote(transport.python)} {shlex.quote(layout.run_dir + '/runner.py')} "
              f"{shlex.quote(layout.run_dir)}")
    log = shlex.quote(f"{layout.run_dir}/runner.out")
    wants_tmux = profile.facts.detach_primitive.startswith("tmux")
    if wants_tmux and transport.run("command -v tmux", check=False, timeout=30).ok:
        session = f"rgt-{layout.run_id}"
        transport.run(f"tmux new-session -d -s {shlex.quote(session)} "
                      f"{shlex.quote(runner + ' >' + log + ' 2>&1')}", timeout=30)
        return f"tmux:{session}"
    transport.run(f"setsid nohup {runner} </dev/null >{log} 2>&1 &", timeout=30)
    return "setsid"


def wait_for_state(transport: Transport, layout: Layout, timeout: float = 30) -> dict:
    """The runner writes state.json within a moment of starting; not seeing it is a failure."""
    path = shlex.quote(f"{layout.run_dir}/state.json")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = transport.run(f"cat {path} 2>/dev/null", check=False, timeout=30)
        if result.ok and result.stdout.strip():
            try:
                return json.loads(result.stdout)
            except json.JSONDecodeError:
                pass  # caught between write and rename on a filesystem without atomic replace
        time.sleep(0.3)
    out = transport.run(f"tail -n 5 {shlex.quote(layout.run_dir + '/runner.out')}", check=False)
    raise UserError(f"the runner did not start on the box within {timeout:.0f} s: "
                    f"{out.stdout.strip() or 'no output'}")
