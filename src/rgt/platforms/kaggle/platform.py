"""Kaggle: a run is a chain of private script kernels pushed through the official client.

    rgt up NAME --profile kaggle        checks the credentials (KAGGLE_USERNAME + KAGGLE_KEY,
                                        kaggle.json or KAGGLE_API_TOKEN) and the GPU quota
    rgt run NAME JOB.yaml               pushes attempt 1 (rgt.platforms.kaggle.api)

Kaggle runs a pushed kernel as a committed version and keeps /kaggle/working as its output
only if the version completes (NB2); rgt's kernel (rgt.onbox.kaggle_kernel) always completes
and says in rgt/status.json what happened. A session is capped (about 9 h on GPU), so the
kernel stops the job at its budget (resources.time, else just under the cap; SIGTERM, the
grace, SIGKILL) with status `continue`; `rgt watch` then pushes the next attempt, a new kernel
whose kernel_sources is the previous one, which resumes from the checkpoints it mounts. A new
`rgt run` of the job resumes the same way: while the job's checkpoint home holds checkpoints,
its first kernel mounts the newest kernel whose output held them (box.extra["ckpt_kernels"]),
numbered on from it so that no kernel lists itself as a source.

The box is a staging folder in RGT_HOME (rgt.platforms.notebook.staging): DATA_DIR = DURABLE_DIR =
RGT_HOME/kaggle/<box>, so the lifecycle's layout holds a run as everywhere. When a version
completes, `state` downloads its output to RUN_DIR/attempts/<n>/ (each file name checked),
checks the declared outputs against the MANIFEST.jsonl the kernel hashed, and lays it out as
the lifecycle reads every box: outputs in RUN_DIR/out, checkpoints in the job's checkpoint
home, every attempt's log in RUN_DIR/log. `pull` then copies and verifies as everywhere.
`down` stops nothing (Kaggle bills nothing; its machine ends with the session) and names the
kernels kept in the account. `rgt ls` shows the GPU quota left, as the API last reported it.

Kaggle queues a pushed version before a session runs it: the run reads "starting" with the
attempt "queued on Kaggle", and `ls`/`top` show how long it has waited (platform_run
"waiting"). A status the client's enum lacks reads "unknown" with the raw value
(kaggle_client.parse_status); `watch` asks again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import Launched, Platform, Released, Request, refuse_unsupported, size_gb
from rgt.platforms.k8s.manifests import seconds_of
from rgt.platforms.kaggle.api import (
    SCRIPT,
    WORKING_LIMIT,
    KaggleClient,
    kernel_folder,
    machine_shape,
)
from rgt.platforms.notebook.staging import (
    check_manifest,
    local_transport,
    manifest_entries,
    read_json,
    read_log,
    record_risk,
    risk_is_stale,
    summary,
    waiting,
    with_box_resources,
    words,
)
from rgt.remote.layout import Layout
from rgt.spec import JobSpec
from rgt.store import LIVE, Box, Run, Store, rgt_home
from rgt.transport import Transport

GPU_CAP_S, CPU_CAP_S = 9 * 3600, 12 * 3600  # a committed version's session (kaggle profile)
CAP_MARGIN_S = 15 * 60  # the kernel's own start, the copy of outputs, Kaggle's save
DEFAULT_GRACE_S = 120.0
MAX_ATTEMPTS = 20
ENV_BUDGET_S = "RGT_KAGGLE_BUDGET_S"  # the spec's env: one attempt's budget, seconds
ENV_GRACE_S = "RGT_KAGGLE_GRACE_S"
ENV_MAX_ATTEMPTS = "RGT_KAGGLE_MAX_ATTEMPTS"
RUNNING = ("running",)
WAITING = ("queued", "new_script")  # kagglesdk KernelWorkerStatus: not started yet
ENDED_BADLY = ("error", "cancel_requested", "cancel_acknowledged")


def check_resources(resources: Any) -> None:
    """What Kaggle can honour, refused by name before anything is pushed."""
    refuse_unsupported("kaggle", KagglePlatform.supports, resources)
    machine_shape(resources.gpu)  # T4 (x1, x2) only
    if resources.disk and size_gb(resources.disk) * 2**30 > WORKING_LIMIT:
        raise UserError(f"Kaggle cannot honour resources.disk {resources.disk!r}: a version "
                        f"keeps at most {WORKING_LIMIT / 1e9:.0f} GB of output (/kaggle/working); "
                        "keep outputs smaller, or write big artifacts to a dataset or the Hub")
    if resources.time:
        cap = GPU_CAP_S if resources.gpu else CPU_CAP_S
        if seconds_of(resources.time) > cap:
            raise UserError(f"Kaggle cannot honour resources.time {resources.time!r}: a session "
                            f"ends at about {cap // 3600} h; rgt continues the job in a new "
                            "attempt from its checkpoint, so ask for one attempt's time")


def _number(env: dict[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name) or default)
    except ValueError:
        raise UserError(f"{name} must be a number, not {env.get(name)!r}") from None
    if not value > 0:
        raise UserError(f"{name} must be above 0, not {value}")
    return value


def budget(spec: JobSpec) -> tuple[float, float]:
    """(budget_s, grace_s) of one attempt: the job gets SIGTERM at budget_s, SIGKILL after
    grace_s more; both inside the session cap."""
    grace = _number(spec.env, ENV_GRACE_S, DEFAULT_GRACE_S)
    cap = GPU_CAP_S if spec.resources.gpu else CPU_CAP_S
    session = seconds_of(spec.resources.time) if spec.resources.time else cap - CAP_MARGIN_S
    default = session - grace if session > 2 * grace else session / 2
    return _number(spec.env, ENV_BUDGET_S, default), grace


def spec_of(run: Run) -> JobSpec:
    """The run's spec as launched, its workdir the code the lifecycle staged for it."""
    fields = {k: v for k, v in run.spec.items() if k in JobSpec.model_fields}
    fields.update(workdir=f"{run.remote_dir}/code", exclude=[])
    return JobSpec.model_validate(fields)


def quota_line(quota: dict[str, Any]) -> str | None:
    if not quota or quota.get("gpu_allowed_s") is None:
        return None
    left, allowed = quota["gpu_left_s"] / 3600, quota["gpu_allowed_s"] / 3600
    line = f"Kaggle GPU quota: {left:.1f} h of {allowed:.0f} h left this week"
    if quota.get("refresh"):
        line += f" (refills {quota['refresh'][:16].replace('T', ' ')} UTC)"
    return line + (" — GPU runs are refused until then" if left <= 0 else "")


def remember_source(store: Store, box: Box, run: Run, attempt: dict[str, Any]) -> None:
    """The newest kernel whose output holds the job's checkpoints: the next run of the job
    mounts it (a kernel sees the laptop's checkpoint home only through such a mount)."""
    extra = store.box(box.name).extra
    sources = {**(extra.get("ckpt_kernels") or {}),
               run.job: {"kernel": attempt["kernel"], "n": attempt["n"], "run_id": run.id}}
    store.update_box(box.name, extra={**extra, "ckpt_kernels": sources})


def resume_source(box: Box, job: str, home: Path) -> dict[str, Any] | None:
    """The kernel a new run of `job` mounts to resume: the one `remember_source` kept, while
    the job's checkpoint home still holds checkpoints (`--fresh` moved them aside: none).
    Its attempt numbers go on from it, so the new kernel's slug is never its own source."""
    source = (box.extra.get("ckpt_kernels") or {}).get(job)
    if not source or not home.is_dir() or not any(home.iterdir()):
        return None
    return source


def resume_notes(source: dict[str, Any] | None, home: Path) -> list[str]:
    if source:
        return [f"the kernel mounts {source['kernel']}'s output (run {source['run_id']}) and "
                "resumes from the checkpoints it holds"]
    if home.is_dir() and any(home.iterdir()):  # the lifecycle said "resuming": not here
        return ["no kernel of this box holds the job's checkpoints (they came from elsewhere): "
                "this run starts from scratch on Kaggle, which sees them only as a kernel's "
                "output"]
    return []


class KagglePlatform(Platform):
    name = "kaggle"
    supports = frozenset({"gpu", "disk", "time"})
    has_shell = False  # a session runs only the kernels rgt pushes through the API

    def __init__(self, profile: str | None = None) -> None:
        super().__init__(profile)
        self._client: KaggleClient | None = None

    @property
    def client(self) -> KaggleClient:
        if self._client is None:
            self._client = KaggleClient()
        return self._client

    def connect(self, box: Box) -> Transport:
        return local_transport(box)

    # ------------------------------------------------------------------ rgt up

    def provision(self, store: Store, request: Request) -> Box:
        if request.target is not None:
            raise UserError("Kaggle has no SSH: drop --ssh/--host; rgt pushes kernels through "
                            "Kaggle's API with your credentials")
        if request.options or request.data_dir or request.durable_dir:
            given = next(iter(request.options), None) or ("data_dir" if request.data_dir
                                                          else "durable_dir")
            raise UserError(f"--{given.replace('_', '-')} does not apply to --profile kaggle: "
                            "it takes only the resource flags (--gpu T4:1, --disk, --time)")
        check_resources(request.resources)
        quota = self.client.quota()  # proves the credentials before anything is stored
        owner = self.client.username
        staging = rgt_home() / "kaggle" / request.name
        staging.mkdir(parents=True, exist_ok=True)
        box = Box(name=request.name, profile=self.profile, connection={"owner": owner},
                  data_dir=str(staging), durable_dir=str(staging), rate=request.rate,
                  state="up", created=time.time(),
                  extra={"uname": f"Kaggle API as {owner}", "owner": owner, "python": None,
                         "created_dirs": [str(staging)]})
        box.extra["python"] = local_transport(box).python
        store.add_box(box)
        store.record("up", {"profile": self.profile, "owner": owner, "quota": quota},
                     box=box.name)
        record_risk(store, box, "quota", quota_line(quota))
        if request.resources.gpu and quota.get("gpu_left_s") == 0:
            request.on_wait(quota_line(quota) or "no GPU quota left")
        return box

    # ------------------------------------------------------------------ rgt run / render

    def render(self, box: Box, spec: JobSpec, run_id: str, *,
               dependency: str | None = None) -> str:
        """kernel-metadata.json and the script `rgt run` would push (attempt 1)."""
        spec = with_box_resources(box, spec)
        check_resources(spec.resources)
        budget_s, grace_s = budget(spec)
        with tempfile.TemporaryDirectory() as tmp:
            meta = kernel_folder(spec, run_id, owner=box.extra.get("owner") or "OWNER",
                                 attempt=1, dest=Path(tmp), budget_s=budget_s, grace_s=grace_s)
            script = (Path(tmp) / SCRIPT).read_text(encoding="utf-8")
        return (f"# kernel-metadata.json\n{json.dumps(meta, indent=1)}\n# {SCRIPT}\n{script}")

    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched:
        try:
            check_resources(spec.resources)
            budget_s, grace_s = budget(spec)
            if spec.resources.gpu:
                quota = self.client.quota()
                if quota.get("gpu_left_s") == 0:
                    raise UserError(f"{quota_line(quota)}; nothing was pushed (run it without "
                                    "resources.gpu, or wait for the refill)")
            staged = spec.model_copy(update={"workdir": Path(layout.code), "exclude": []})
            source = resume_source(box, spec.name, Path(layout.ckpt))
            attempt = self._push(staged, layout.run_id, Path(layout.run_dir), box,
                                 source["n"] + 1 if source else 1, budget_s, grace_s,
                                 previous=source and source["kernel"],
                                 resumes_run=source and source["run_id"])
        except UserError:
            shutil.rmtree(layout.run_dir, ignore_errors=True)  # a secrets file among it
            raise
        info = {"kind": "kaggle", "budget_s": budget_s, "grace_s": grace_s,
                "max_attempts": int(_number(spec.env, ENV_MAX_ATTEMPTS, MAX_ATTEMPTS)),
                "attempts": [attempt], "log": f"{layout.run_dir}/log"}
        waiting(info, f"kernel {attempt['kernel']} pushed; Kaggle has not started it yet",
                attempt["pushed"])
        return Launched(detach=f"kaggle:{attempt['kernel']}", platform_run=info,
                        status="starting", notes=[
                            f"pushed private kernel {attempt['kernel']} (version "
                            f"{attempt['version']}); each attempt stops its job after "
                            f"{budget_s / 3600:.2f} h and `rgt watch` continues it in a new "
                            "kernel from its checkpoint",
                            "Kaggle hands over a version's log and output when it completes: "
                            "`rgt watch` shows the state meanwhile",
                            *resume_notes(source, Path(layout.ckpt))])

    def _push(self, spec: JobSpec, run_id: str, run_dir: Path, box: Box, number: int,
              budget_s: float, grace_s: float, previous: str | None,
              resumes_run: str | None = None) -> dict[str, Any]:
        folder = run_dir / "kernels" / f"a{number}"
        shutil.rmtree(folder, ignore_errors=True)
        meta = kernel_folder(spec, run_id, owner=box.extra["owner"], attempt=number,
                             dest=folder, budget_s=budget_s, grace_s=grace_s, previous=previous,
                             resumes_run=resumes_run)
        _, version = self.client.push(folder)
        return {"n": number, "kernel": meta["id"], "version": version, "pushed": time.time(),
                "outcome": None}

    # ------------------------------------------------------------------ rgt watch / logs

    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]:
        if risk_is_stale(box, "quota"):
            with contextlib.suppress(UserError):
                record_risk(store, box, "quota", quota_line(self.client.quota()))
        info = json.loads(json.dumps(run.spec.get("platform_run") or {}))
        attempts = info.get("attempts") or []
        if not attempts:
            raise UserError(f"run {run.id} has no Kaggle kernel recorded")
        run_dir = Path(run.remote_dir)
        log = run_dir / "log"
        home = run.spec.get("ckpt_home")
        current = attempts[-1]
        first = {"started": attempts[0]["pushed"]}
        where = f"attempt {current['n']} (kernel {current['kernel']})"
        if current.get("outcome") is None:
            status, failure, raw = self.client.status(current["kernel"])
            waited = max(0.0, time.time() - float(current.get("pushed") or time.time()))
            if status in WAITING:
                what = (f"{where} is queued on Kaggle: waiting for a session, not running yet "
                        f"({words(waited)} since the push)")
                self._wait(store, run, info, f"{where} queued on Kaggle, not running yet",
                           since=current.get("pushed"))
                return summary("starting", state=first, log=log, home=home, cause=what)
            self._wait(store, run, info, None)
            if status in RUNNING:
                return summary("running", state=first, log=log, home=home, cause=(
                    f"{where} is running on Kaggle; its log arrives when it completes"))
            if status == "complete":
                current["outcome"] = self._collect(run, current, attempts)
                if current["outcome"].get("ckpt"):
                    remember_source(store, box, run, current)
            elif status in ENDED_BADLY:
                current["outcome"] = {"status": "failed", "ended": time.time(), "cause": (
                    f"Kaggle ended {where} as {status}: {failure or 'no reason given'}; a "
                    "failed version keeps no output (NB2)")}
            else:
                return summary("unknown", state=first, log=log, home=home,
                               cause=f"Kaggle reports {where} with a status rgt does not know: "
                                     f"{raw!r}" + (f" ({failure})" if failure else ""),
                               advice="`rgt watch` asks again; the kernel may still be running "
                                      f"(see kaggle.com/code/{current['kernel']})")
            self._save(store, run, info)
        outcome = current["outcome"]
        if outcome["status"] == "continue":
            return self._continue(store, box, run, info, first, log, home)
        state = {**first, "ended": outcome.get("ended"), "exit_code": outcome.get("exit_code")}
        if outcome["status"] == "succeeded":
            return summary("succeeded", state=state, log=log, home=home,
                           cause=f"in {len(attempts)} attempt(s)" if len(attempts) > 1 else "")
        return summary("failed", state=state, log=log, home=home,
                       cause=str(outcome.get("cause") or "the job failed"),
                       advice="read `rgt logs`; fix it and `rgt run` again: a new run resumes "
                              "from the job's checkpoints")

    def _continue(self, store: Store, box: Box, run: Run, info: dict[str, Any],
                  first: dict[str, Any], log: Path, home: str | None) -> dict[str, Any]:
        """A capped attempt: push the next one, mounting this one's output (kernel_sources)."""
        attempts = info["attempts"]
        current = attempts[-1]
        step = current["outcome"].get("step")
        earlier = attempts[-2]["outcome"].get("step") if len(attempts) > 1 else None
        stuck = step is None or (earlier is not None and step <= earlier)
        if stuck or len(attempts) >= info.get("max_attempts", MAX_ATTEMPTS):
            why = (f"attempt {current['n']} reached its session budget without a new checkpoint "
                   f"(step {step}, before it {earlier})" if stuck else
                   f"{len(attempts)} attempts used ({ENV_MAX_ATTEMPTS})")
            current["outcome"] = {**current["outcome"], "status": "failed", "cause": why}
            self._save(store, run, info)
            return summary("failed", state={**first, "ended": current["outcome"].get("ended")},
                           log=log, home=home, cause=why,
                           advice="checkpoint more often (rgt.ckpt), or give each attempt "
                                  f"more time ({ENV_BUDGET_S} / resources.time)")
        nxt = self._push(spec_of(run), run.id, Path(run.remote_dir), box, current["n"] + 1,
                         info["budget_s"], info["grace_s"], previous=current["kernel"])
        attempts.append(nxt)
        waiting(info, f"attempt {nxt['n']} (kernel {nxt['kernel']}) pushed; Kaggle has not "
                      "started it yet", nxt["pushed"])
        self._save(store, run, info)
        store.record("kaggle-continue", {"from": current["kernel"], "to": nxt["kernel"],
                                         "version": nxt["version"], "step": step},
                     box=box.name, run=run.id)
        return summary("running", state=first, log=log, home=home, cause=(
            f"attempt {current['n']} reached its session budget at step {step}; attempt "
            f"{nxt['n']} (kernel {nxt['kernel']}) continues from that checkpoint"))

    def _wait(self, store: Store, run: Run, info: dict[str, Any], what: str | None, *,
              since: float | None = None) -> None:
        """Keep what the run waits for where `rgt ls` and `rgt top` read it."""
        if waiting(info, what, since):
            self._save(store, run, info)

    @staticmethod
    def _save(store: Store, run: Run, info: dict[str, Any]) -> None:
        run.spec = {**run.spec, "platform_run": info}
        store.update_run(run.id, spec=run.spec)

    def _collect(self, run: Run, current: dict[str, Any], attempts: list[dict[str, Any]]
                 ) -> dict[str, Any]:
        """Download a completed version's output and lay it out as the lifecycle reads a run."""
        run_dir = Path(run.remote_dir)
        dest = run_dir / "attempts" / str(current["n"])
        shutil.rmtree(dest, ignore_errors=True)
        self.client.output(current["kernel"], dest)
        kept = dest / "rgt"
        said = read_json(kept / "status.json") or {}
        status = said.get("status")
        ended = said.get("ended") if type(said.get("ended")) in (int, float) else time.time()
        step = said.get("step") if type(said.get("step")) is int else None
        exit_code = said.get("exit_code") if type(said.get("exit_code")) is int else None
        self._write_log(run_dir, attempts)
        home = run.spec.get("ckpt_home")
        if home and (kept / "ckpt").is_dir():
            shutil.copytree(kept / "ckpt", home, symlinks=True, dirs_exist_ok=True)
        if status not in ("succeeded", "failed", "continue"):
            return {"status": "failed", "ended": ended, "cause": (
                f"attempt {current['n']}'s output holds no rgt/status.json rgt can read: the "
                "kernel did not get to write it")}
        if status == "succeeded":
            entries = manifest_entries(kept / "MANIFEST.jsonl")
            wrong = ["MANIFEST.jsonl"] if entries is None else check_manifest(kept, entries)
            if wrong:
                shutil.rmtree(dest, ignore_errors=True)  # the next watch downloads it again
                raise UserError(f"the output of {current['kernel']} did not download whole "
                                f"({', '.join(wrong[:3])}); `rgt watch` again fetches it again")
            out = run_dir / "out"
            shutil.rmtree(out, ignore_errors=True)
            if (kept / "outputs").is_dir():
                shutil.copytree(kept / "outputs", out, symlinks=True)
            else:
                out.mkdir()
        cause = str(said.get("cause") or "")[:500]
        return {"status": status, "ended": ended, "step": step, "exit_code": exit_code,
                "cause": cause, "ckpt": (kept / "ckpt").is_dir() and any(
                    (kept / "ckpt").iterdir())}

    @staticmethod
    def _write_log(run_dir: Path, attempts: list[dict[str, Any]]) -> None:
        """Every attempt's log so far, in order, as RUN_DIR/log."""
        parts = []
        for attempt in attempts:
            path = run_dir / "attempts" / str(attempt["n"]) / "rgt" / "log.txt"
            with contextlib.suppress(OSError):
                text = path.read_bytes()[-(64 << 20):].decode("utf-8", "replace")
                parts.append(f"rgt: ---- attempt {attempt['n']}: kernel {attempt['kernel']} "
                             f"version {attempt['version']} ----\n{text}")
        tmp = run_dir / ".log.rgt-tmp"
        tmp.write_text("".join(parts), encoding="utf-8")
        os.replace(tmp, run_dir / "log")

    def logs(self, transport: Transport, box: Box, run: Run, *, lines: int | None = None,
             cell: int | None = None, since_byte: int | None = None) -> str:
        if cell is not None:
            raise UserError(f"run {run.id} has no cell {cell} (it is not a sweep)")
        return read_log(Path(run.remote_dir) / "log", lines=lines, since_byte=since_byte,
                        what=f"run {run.id}: Kaggle hands over a version's log when it "
                             "completes (`rgt watch` fetches it)")

    # ------------------------------------------------------------------ rgt pull

    # ------------------------------------------------------------------ rgt down / audit

    def stops_meter(self, box: Box) -> bool:
        return True  # nothing bills; release says what stays in the Kaggle account

    def release(self, store: Store, box: Box) -> Released:
        kernels = sorted({a["kernel"] for run in store.runs(box.name)
                          for a in (run.spec.get("platform_run") or {}).get("attempts") or []})
        for run in store.runs(box.name):
            if run.status in LIVE:
                store.update_run(run.id, status="cancelled")
        shutil.rmtree(box.data_dir, ignore_errors=True)  # rgt's staging in RGT_HOME
        store.update_box(box.name, extra={**store.box(box.name).extra, "still_billing": []})
        kept = (f"kept in your Kaggle account: private kernel(s) {', '.join(kernels)} with "
                "their versions' outputs (delete them at kaggle.com/code if you like)"
                if kernels else "no kernel was pushed")
        return Released("Kaggle bills nothing and ends each session itself; removed rgt's "
                        f"staging here; {kept}")

    def audit_extras(self, transport: Transport, box: Box) -> dict[str, Any]:
        quota = self.client.quota()
        line = quota_line(quota)
        verdicts = [{"level": "warn" if quota.get("gpu_left_s") == 0 else "ok", "id": "KG",
                     "message": line}] if line else []
        owner = box.extra.get("owner")  # "shown": what `rgt audit` prints from outside
        return {"kaggle": {"owner": owner, "quota": quota, "verdicts": verdicts,
                           "shown": [["Kaggle account", str(owner)]] if owner else []}}
