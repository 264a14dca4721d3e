"""Start the on-box runner (`rgt.onbox.runner`) detached, and wait until it says it started.

The runner owns `state.json`, the log, signal forwarding and the verified copy of outputs to
the durable tier; every platform whose box runs a shell can hand a pushed run to it.
"""

from __future__ import annotations

import json
import shlex
import time

from rgt.boxread import MAX_ANSWER, BoxGarbage, box_json, checked
from rgt.errors import UserError
from rgt.onbox import script_source
from rgt.profiles import Profile
from rgt.remote.calls import write_file
from rgt.remote.layout import Layout, job_environment
from rgt.spec import JobSpec
from rgt.transport import Transport


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
        "pythonpath": [layout.lib],
        "recover": spec.recover.model_dump() if spec.recover else None,
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
    # macOS has no setsid(1) (a local box there is the Mac): without it, nohup alone, in the
    # session of its own that every LocalTransport command starts in.
    transport.run(f"$(command -v setsid) nohup {runner} </dev/null >{log} 2>&1 &", timeout=30)
    return "setsid"


def wait_for_state(transport: Transport, layout: Layout, timeout: float = 30) -> dict:
    """The runner writes state.json within a moment of starting; not seeing it is a failure."""
    path = shlex.quote(f"{layout.run_dir}/state.json")
    out = shlex.quote(f"{layout.run_dir}/runner.out")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # the state, or the runner's one-line refusal (another launch of the job lives)
        result = transport.run(f"cat {path} 2>/dev/null || {{ tail -c 4000 {out} 2>/dev/null "
                               "| grep '\"refused\": true' | tail -n 1 | sed 's/^/REFUSED /'"
                               "; false; }", check=False, timeout=30, limit=MAX_ANSWER)
        if result.stdout.startswith("REFUSED "):
            raise UserError(f"the box's runner refused to start the job: "
                            f"{refusal_reason(result.stdout[len('REFUSED '):])}")
        if result.truncated or result.ok and result.stdout.strip():
            try:
                return checked(box_json(result.stdout, "the run's state.json",
                                        truncated=result.truncated), {}, "the run's state.json")
            except BoxGarbage as err:
                if "not JSON" not in str(err):
                    raise
                # not JSON: caught between write and rename on a filesystem without atomic
                # replace; asked again
        time.sleep(0.3)
    out = transport.run(f"tail -n 5 {shlex.quote(layout.run_dir + '/runner.out')} | "
                        "tail -c 2000", check=False, limit=2000)
    raise UserError(f"the runner did not start on the box within {timeout:.0f} s: "
                    f"{out.stdout.strip() or 'no output'}")


def refusal_reason(line: str) -> str:
    """The reason in the runner's refusal line ({"refused": true, "reason": ...}), as text that
    can be shown (box text: sanitised by the caller's escape)."""
    try:
        reason = json.loads(line).get("reason")
    except (ValueError, AttributeError):
        reason = None
    return str(reason)[:500] if reason else line.strip()[:500]
