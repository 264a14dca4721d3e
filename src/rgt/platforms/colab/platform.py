"""Google Colab: a box is the user's Google Drive, seen through a sync folder on this machine.

    rgt up NAME --profile colab --drive PATH     PATH: where Drive for desktop (or an rclone
                                                 mount) shows "My Drive"
    rgt run NAME JOB.yaml                        writes the notebook and the code to Drive
    rgt render JOB.yaml --profile colab -o x.ipynb   one self-contained notebook, no box

Nothing reaches a Colab runtime but the browser, so rgt never runs anything there. `rgt run`
puts two files in the run's Drive folder, MyDrive/rgt/<run-id>/: the workdir as a bundle and
the notebook (rgt.platforms.notebook.build), which the user opens in Colab and runs (Run all,
again after every disconnect: it resumes, NB5). The notebook writes back to the same folder
through Google: state.json (with a heartbeat), log.txt, out/ and MANIFEST.jsonl, and the job's
checkpoints to MyDrive/rgt/jobs/<job>/ckpt — the lifecycle's own layout with DURABLE_DIR = the
sync folder. DATA_DIR is a staging folder in RGT_HOME: the push, rgt.ckpt and any secrets
file land there, never on Drive.

The Transport is this machine's (rgt.platforms.notebook.staging): `watch` reads state.json and
the log from the sync folder, and calls a run whose heartbeat stopped "paused" (the runtime
died; Run all again), never ended. `pull` copies from the sync folder once every output matches the
MANIFEST.jsonl the notebook hashed from Drive itself: a file the sync has not finished is
refused, not pulled. `down` has nothing to stop (the free tier bills nothing; the runtime ends
by itself) and says what stays on Drive, in the user's Drive quota.

A notebook nobody has opened yet leaves the run "starting": `watch`, `ls` and `top` say so
(the platform_run's "waiting" note) and for how long. The run records what rgt wrote to its
Drive folder (the notebook and code bundle, by sha256); while the folder holds exactly that,
the run never started and `state` says so (never_started), so `down` needs no
--discard-results for it and `release` removes those two files. A notebook Colab saved back,
or any other file there, counts as started: the Iron Law applies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.platforms.base import (
    Launched,
    Platform,
    Released,
    ReleaseRefused,
    Request,
    Teardown,
    refuse_unsupported,
)
from rgt.platforms.notebook.build import (
    BUNDLE_NAME,
    CodeSource,
    build_notebook,
    bundle_workdir,
    inline_source,
    notebook_json,
)
from rgt.platforms.notebook.staging import (
    check_manifest,
    gib,
    local_transport,
    manifest_entries,
    read_json,
    read_log,
    record_risk,
    risk_is_stale,
    sha256_of,
    summary,
    tree_bytes,
    waiting,
    with_box_resources,
    words,
)
from rgt.remote.layout import Layout
from rgt.spec import JobSpec
from rgt.store import LIVE, Box, Run, Store, rgt_home
from rgt.transport import TransferStats, Transport

ENV_STALE_S = "RGT_COLAB_STALE_S"  # no heartbeat for this long: the runtime is gone
STALE_S = 15 * 60  # heartbeats every 30 s, plus Drive's upload lag (minutes, NB1)
HEARTBEAT_S = 30


def notebook_name(spec: JobSpec, run_id: str) -> str:
    return f"rgt-{spec.name}-{run_id}.ipynb"


def my_drive(given: str) -> Path:
    """The folder that is "My Drive": the one given, or its "My Drive" child when the user gave
    the account's folder (Drive for desktop shows GoogleDrive-<account>/My Drive)."""
    path = Path(given).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_dir():
        raise UserError(f"--drive {given}: no such folder here. Give the folder where Google "
                        "Drive for desktop (or `rclone mount`) shows your My Drive, e.g. "
                        "~/Library/CloudStorage/GoogleDrive-you@gmail.com/My Drive")
    for child in ("My Drive", "MyDrive"):
        if (path / child).is_dir() and not (path / "rgt").exists():
            path = path / child
            break
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"--drive {path}: this user cannot write there; rgt puts each run's "
                        "notebook and code in its rgt/ folder")
    return path.resolve()


def drive_space(root: Path) -> str:
    """What rgt keeps on Drive, and Drive's free space where the sync folder tells it: a mount
    of its own (rclone mount, a Drive volume) reports Drive's quota as its size; a mirrored
    folder on the laptop's disk does not (then only rgt's own use is said)."""
    used, files = tree_bytes(root / "rgt")
    line = f"Drive: rgt keeps {gib(used)} in {files} file(s) under {root / 'rgt'}"
    with contextlib.suppress(OSError):
        own_mount = os.stat(root).st_dev != os.stat(Path.home()).st_dev
        if own_mount:
            fs = os.statvfs(root)
            total, free = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
            if total:
                line += f"; {gib(free)} free of {gib(total)}"
                if free < 0.1 * total:
                    line += " — checkpoints stop saving when Drive is full"
    return line


class ColabPlatform(Platform):
    name = "colab"
    supports = frozenset({"gpu"})
    has_shell = False  # a browser runs the notebook; rgt only reads and writes Drive

    def connect(self, box: Box) -> Transport:
        return local_transport(box)

    # ------------------------------------------------------------------ rgt up

    def provision(self, store: Store, request: Request) -> Box:
        if request.target is not None:
            raise UserError("Colab has no SSH: drop --ssh/--host; rgt reaches a Colab run "
                            "through your Google Drive (--drive PATH)")
        refuse_unsupported(self.profile, self.supports, request.resources)
        options = dict(request.options)
        given = options.pop("drive", None) or request.durable_dir
        if options:
            raise UserError(f"--{next(iter(options)).replace('_', '-')} does not apply to "
                            "--profile colab (it takes --drive PATH)")
        if not given:
            raise UserError("--profile colab needs --drive PATH: the folder where Google Drive "
                            "for desktop (or `rclone mount`) shows your My Drive; the notebook "
                            "keeps everything there and rgt reads it back from that folder")
        if request.data_dir:
            raise UserError("--data-dir does not apply to --profile colab: the runtime's "
                            "/content is scratch, and rgt stages pushes in RGT_HOME")
        drive = my_drive(str(given))
        staging = rgt_home() / "colab" / request.name
        staging.mkdir(parents=True, exist_ok=True)
        made = not (drive / "rgt").exists()
        (drive / "rgt").mkdir(exist_ok=True)
        box = Box(name=request.name, profile=self.profile, connection={"drive": str(drive)},
                  data_dir=str(staging), durable_dir=str(drive), rate=request.rate, state="up",
                  created=time.time(),
                  extra={"uname": f"Google Drive through {drive}", "python": None,
                         "created_dirs": [str(staging)], "made_drive_rgt": made})
        box.extra["python"] = local_transport(box).python
        store.add_box(box)
        store.record("up", {"profile": self.profile, "drive": str(drive),
                            "staging": str(staging)}, box=box.name)
        record_risk(store, box, "drive", drive_space(drive))
        return box

    # ------------------------------------------------------------------ rgt run / render

    def render(self, box: Box, spec: JobSpec, run_id: str, *,
               dependency: str | None = None) -> str:
        """The notebook with the workdir inside it: one file to open in Colab."""
        spec = with_box_resources(box, spec)
        refuse_unsupported(self.profile, self.supports, spec.resources)
        return notebook_json(build_notebook(spec, run_id, inline_source(spec.workdir,
                                                                        spec.exclude),
                                            heartbeat_s=HEARTBEAT_S))

    def launch(self, transport: Transport, box: Box, spec: JobSpec, layout: Layout, *,
               dependency: str | None = None) -> Launched:
        drive_run = Path(layout.durable_run_dir)
        expected = Path(box.durable_dir) / "rgt" / "jobs" / spec.name / "ckpt"
        try:
            if Path(layout.ckpt) != expected:
                raise UserError(f"checkpoint_dir {spec.checkpoint_dir!r}: on Colab the job's "
                                "checkpoints live in MyDrive/rgt/jobs/<job>/ckpt (the "
                                "notebook's $RGT_CKPT_DIR); drop checkpoint_dir or set it to "
                                "$RGT_CKPT_DIR")
            # the code as the lifecycle pushed it to staging (.rgtignore and excludes applied)
            blob, digest = bundle_workdir(Path(layout.code), [])
            notebook = build_notebook(spec, layout.run_id, CodeSource("bundle", sha256=digest),
                                      heartbeat_s=HEARTBEAT_S)
        except UserError:
            shutil.rmtree(layout.run_dir, ignore_errors=True)  # a secrets file among it
            raise
        drive_run.mkdir(parents=True, exist_ok=True)
        write_atomic(drive_run / BUNDLE_NAME, blob)
        name = notebook_name(spec, layout.run_id)
        write_atomic(drive_run / name, notebook_json(notebook).encode())
        shown = f"MyDrive/rgt/{layout.run_id}/{name}"
        gpu = spec.resources.gpu
        notes = [f"open {shown} in Colab (drive.google.com, or colab.research.google.com > "
                 "File > Open notebook > Google Drive) once your Drive has synced it, "
                 + (f"pick a GPU runtime ({gpu}), " if gpu else "")
                 + "then Runtime > Run all. Keep the tab open (free tier); after a disconnect "
                 "Run all again: it resumes from the newest checkpoint on Drive",
                 "`rgt watch` reads the run's state from your Drive sync folder: it lags "
                 "Colab by as long as the sync takes"]
        info = {"kind": "colab", "notebook": str(drive_run / name),
                "log": str(drive_run / "log.txt"),
                # what rgt wrote to the run's Drive folder: anything else there, or either
                # file changed (Colab saves a notebook it opened), means the run was touched
                "wrote": {BUNDLE_NAME: hashlib.sha256(blob).hexdigest(),
                          name: sha256_of(drive_run / name)},
                "never_started": True}
        waiting(info, unopened_note(shown), time.time())
        return Launched(detach=f"colab-notebook:{shown}", platform_run=info, status="starting",
                        notes=notes)

    # ------------------------------------------------------------------ rgt watch / logs

    def state(self, store: Store, box: Box, run: Run, transport: Transport) -> dict[str, Any]:
        drive_run = Path(run.spec["durable_run_dir"])
        log = drive_run / "log.txt"
        mirror_log(log, Path(run.remote_dir) / "log")
        if risk_is_stale(box, "drive"):
            record_risk(store, box, "drive", drive_space(Path(box.durable_dir)))
        home = run.spec.get("ckpt_home")
        state = read_json(drive_run / "state.json")
        name = Path((run.spec.get("platform_run") or {}).get("notebook") or "notebook").name
        info = json.loads(json.dumps(run.spec.get("platform_run") or {}))
        if state is None:
            return self._not_started(store, run, info, drive_run, name, log, home)
        if info.get("never_started") or info.get("waiting"):
            info["never_started"] = False
            waiting(info, None)
            save_info(store, run, info)
        said = state.get("status")
        beat = state.get("heartbeat")
        age = time.time() - beat if type(beat) in (int, float) else None
        if said in ("starting", "running", "finishing"):
            stale = stale_after()
            if age is not None and age > stale:
                return summary("paused", state=state, log=log, home=home, heartbeat_age=age,
                               cause=f"no heartbeat on Drive for {age / 60:.0f} min: the Colab "
                                     "runtime has likely disconnected (idle timeout, the ~12 h "
                                     "ceiling, or the tab closed; NB5)",
                               advice="reconnect and Runtime > Run all: the job resumes from "
                                      "its newest checkpoint on Drive")
            sessions = state.get("sessions")
            return summary("starting" if said == "starting" else "running", state=state,
                           log=log, home=home, heartbeat_age=age,
                           cause=f"Colab session {sessions}" if type(sessions) is int
                           and sessions > 1 else "")
        if said == "succeeded":
            if manifest_entries(drive_run / "MANIFEST.jsonl") is None:
                return summary("running", state=state, log=log, home=home, heartbeat_age=age,
                               cause="Colab says it finished; MANIFEST.jsonl has not synced "
                                     "here yet")
            return summary("succeeded", state=state, log=log, home=home)
        if said in ("failed", "preempted"):
            cause = str(state.get("cause") or "")[:300]
            return summary(said, state=state, log=log, home=home,
                           cause=cause or f"the job exited {state.get('exit_code')}",
                           advice="fix the cause, then Run all again in the same notebook: it "
                                  "resumes from the checkpoints on Drive")
        return summary("unknown", state=state, log=log, home=home,
                       cause="state.json on Drive holds no status rgt knows")

    def _not_started(self, store: Store, run: Run, info: dict[str, Any], drive_run: Path,
                     name: str, log: Path, home: str | None) -> dict[str, Any]:
        """No state.json yet: the notebook was never opened (nothing but what rgt wrote is in
        the run's Drive folder), or it was (Colab saved it back, or files appeared) and its
        state has not synced here yet. Only the first is a run that never started."""
        shown = f"MyDrive/rgt/{run.id}/{name}"
        touched = touched_files(drive_run, info)
        since = float((info.get("waiting") or {}).get("since") or run.created)
        waited = words(time.time() - since)
        if not isinstance(info.get("wrote"), dict):  # launched before rgt kept that record
            what = (f"nothing from the notebook in {shown.rsplit('/', 1)[0]}/ has synced here "
                    "yet (open it in Colab, then Run all)")
            cause = (f"nothing from the notebook has reached this sync folder yet: open {shown} "
                     "in Colab and Runtime > Run all (rgt cannot tell whether it was opened: "
                     "the run predates its record of what rgt wrote)")
        elif touched:
            what = (f"notebook in {shown.rsplit('/', 1)[0]}/ opened in Colab, but no state "
                    "of its run has synced here yet")
            cause = (f"the notebook {shown} was opened in Colab ({touched}) but nothing from "
                     "its run has reached this sync folder yet: Runtime > Run all if you have "
                     "not, or wait for the sync")
        else:
            what = unopened_note(shown)
            cause = (f"the notebook has not been opened yet: open {shown} in Colab "
                     "(drive.google.com, or colab.research.google.com > File > Open notebook > "
                     "Google Drive), then Runtime > Run all")
        changed = waiting(info, what, since)
        if info.get("never_started") != (not touched):
            info["never_started"], changed = not touched, True
        if changed:
            save_info(store, run, info)
        out = summary("starting", state={}, log=log, home=home,
                      cause=f"{cause} (waiting {waited})")
        out["never_started"] = not touched  # down: no results can exist, none to lose
        return out

    def logs(self, transport: Transport, box: Box, run: Run, *, lines: int | None = None,
             cell: int | None = None, since_byte: int | None = None) -> str:
        if cell is not None:
            raise UserError(f"run {run.id} has no cell {cell} (it is not a sweep)")
        return read_log(Path(run.spec["durable_run_dir"]) / "log.txt", lines=lines,
                        since_byte=since_byte,
                        what=f"run {run.id}: the notebook has not written to Drive yet")

    # ------------------------------------------------------------------ rgt pull

    def fetch(self, transport: Transport, box: Box, run: Run, remote: str, local: Path, *,
              exclude: Sequence[str] = (), progress: Any = None) -> TransferStats:
        """Copy from the sync folder; the outputs only once each matches the manifest the
        notebook hashed from Drive (a sync shows a file's name before its bytes, NB1)."""
        drive_run = Path(run.spec["durable_run_dir"])
        if Path(remote) == drive_run or drive_run in Path(remote).parents:
            entries = manifest_entries(drive_run / "MANIFEST.jsonl")
            if entries is None:
                raise UserError(f"MANIFEST.jsonl of run {run.id} is not (wholly) in your Drive "
                                "sync folder yet: wait for the sync, then pull again")
            prefix = Path(remote).relative_to(drive_run).as_posix()
            wrong = check_manifest(drive_run, entries, "" if prefix == "." else prefix + "/")
            if wrong:
                raise UserError(f"your Drive sync folder does not hold the run's outputs as "
                                f"Colab wrote them yet: {', '.join(wrong[:3])}"
                                + (f" and {len(wrong) - 3} more" if len(wrong) > 3 else "")
                                + "; wait for the sync, then pull again")
        return transport.get(remote, local, exclude=exclude, progress=progress)

    # ------------------------------------------------------------------ rgt down / audit

    def stops_meter(self, box: Box) -> bool:
        return True  # nothing bills: release only says what stays on Drive

    def teardown(self, store: Store, box: Box) -> Teardown:
        unstarted = self._unstarted(store, box)
        return Teardown(
            destroys=[f"rgt's staging {box.data_dir}"]
            + [f"MyDrive/rgt/{run.id}/ (only the notebook and code rgt wrote: the run never "
               "started)" for run, _ in unstarted],
            keeps=["everything else rgt keeps on Drive (runs' logs and outputs, the jobs' "
                   "checkpoints), in your Google storage quota"],
            notes=[f"run {run.id} never started (its notebook was never opened): there are no "
                   "results to lose" for run, _ in unstarted])

    @staticmethod
    def _unstarted(store: Store, box: Box) -> list[tuple[Run, Path]]:
        """Live runs that `state` last saw untouched (never_started), with their Drive folder."""
        found = []
        for run in store.runs(box.name):
            info = run.spec.get("platform_run") or {}
            if run.status in LIVE and info.get("never_started") is True:
                found.append((run, Path(run.spec["durable_run_dir"])))
        return found

    def release(self, store: Store, box: Box) -> Released:
        drive = Path(box.durable_dir)
        unstarted = self._unstarted(store, box)
        for run, drive_run in unstarted:  # all checked before anything is removed
            touched = touched_files(drive_run, run.spec["platform_run"])
            if (drive_run / "state.json").exists():
                touched = "its state.json reached Drive"
            if touched:
                raise ReleaseRefused(f"run {run.id} started after rgt looked ({touched}): nothing "
                                f"was done; `rgt down {box.name}` again judges it as a run "
                                "with results")
        removed = []
        for run, drive_run in unstarted:
            for rel in run.spec["platform_run"].get("wrote") or {}:
                with contextlib.suppress(OSError):
                    (drive_run / rel).unlink()
            with contextlib.suppress(OSError):
                drive_run.rmdir()
                removed.append(f"MyDrive/rgt/{run.id}")
            ckpt = Path(run.spec.get("ckpt_home") or drive_run)
            for empty in (ckpt, ckpt.parent, ckpt.parent.parent):  # jobs/<job>/ckpt, if empty
                if drive / "rgt" in empty.parents:
                    with contextlib.suppress(OSError):
                        empty.rmdir()
        _, files = tree_bytes(drive / "rgt")
        if not files and box.extra.get("made_drive_rgt"):
            with contextlib.suppress(OSError):  # the folder `rgt up` made, holding no file
                for empty in sorted((drive / "rgt").rglob("*"), reverse=True):
                    empty.rmdir()
                (drive / "rgt").rmdir()
        kept = drive_space(drive).removeprefix("Drive: ")
        shutil.rmtree(box.data_dir, ignore_errors=True)  # rgt's staging in RGT_HOME
        for run in store.runs(box.name):
            if run.status in LIVE:
                store.update_run(run.id, status="cancelled")
        still = [f"{kept} — in your Google storage quota until you delete it"] if files else []
        store.update_box(box.name, extra={**store.box(box.name).extra, "still_billing": still})
        return Released("Colab's free tier bills nothing and its runtime ends by itself (close "
                        "the tab to end it now); removed rgt's staging here"
                        + (f" and what rgt wrote for the runs that never started "
                           f"({', '.join(removed)})" if removed else "")
                        + (f". Kept on Drive: {kept} (runs, notebooks, checkpoints)" if files
                           else ". rgt keeps nothing on Drive"), still_billing=still)

    def audit_extras(self, transport: Transport, box: Box) -> dict[str, Any]:
        drive = Path(box.durable_dir)
        verdicts = []
        if not drive.is_dir():
            verdicts.append({"level": "fail", "id": "NB1", "message": f"the Drive folder "
                             f"{drive} is gone: is Drive for desktop running and signed in?"})
        else:
            verdicts.append({"level": "ok", "id": "NB1", "message": drive_space(drive)})
        # "shown": the lines `rgt audit` prints for a runtime it cannot measure
        return {"colab": {"drive": str(drive), "verdicts": verdicts,
                          "shown": [["Drive folder", str(drive)]]}}


IGNORED = frozenset({".DS_Store", "desktop.ini", "Thumbs.db"})  # what sync clients add


def unopened_note(shown: str) -> str:
    return (f"notebook not opened yet: open {shown.rsplit('/', 1)[0]}/*.ipynb in Colab, then "
            "Run all")


def touched_files(drive_run: Path, info: dict[str, Any]) -> str:
    """How the run's Drive folder differs from what rgt wrote there (empty: not at all). A run
    launched before rgt recorded its files counts as touched: nothing proves otherwise."""
    wrote = info.get("wrote")
    if not isinstance(wrote, dict) or not wrote:
        return "rgt has no record of what it wrote there"
    try:
        names = sorted(p.name for p in drive_run.iterdir() if p.name not in IGNORED
                       and not p.name.endswith(".rgt-tmp"))
    except OSError:
        return "its Drive folder cannot be read"
    extra = [n for n in names if n not in wrote]
    if extra:
        return f"{', '.join(extra[:3])} appeared on Drive"
    for rel, digest in wrote.items():
        path = drive_run / rel
        try:
            same = path.is_file() and not path.is_symlink() and sha256_of(path) == digest
        except OSError:
            same = False
        if not same:
            return (f"Colab saved {rel} back to Drive" if rel.endswith(".ipynb") else
                    f"{rel} changed on Drive")
    return ""


def save_info(store: Store, run: Run, info: dict[str, Any]) -> None:
    run.spec = {**run.spec, "platform_run": info}
    store.update_run(run.id, spec=run.spec)


def stale_after() -> float:
    try:
        return float(os.environ.get(ENV_STALE_S) or STALE_S)
    except ValueError:
        raise UserError(f"{ENV_STALE_S} must be a number of seconds") from None


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.rgt-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def mirror_log(source: Path, dest: Path) -> None:
    """The log as Drive shows it, copied where the lifecycle reads every box's log
    (RUN_DIR/log: `rgt pull` keeps it with the results)."""
    with contextlib.suppress(OSError):
        if dest.exists() and dest.stat().st_size == source.stat().st_size:
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest.with_name(".log.rgt-tmp"))
        os.replace(dest.with_name(".log.rgt-tmp"), dest)
