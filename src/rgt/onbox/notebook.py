"""rgt's Colab notebook runtime: the cells of a generated notebook call these functions.

The text of this module goes into the notebook as one cell (standard library only, Python >=
3.8, no `rgt` on the runtime), so the notebook needs nothing but Google Drive. Each session:

    rgt_mount(CFG)    mount Drive at /content/drive; one clear error when it cannot be
    rgt_restore(CFG)  a fresh workdir under /content (scratch, NB4): the code bundle rgt put in
                      the run's Drive folder, or a git clone; rgt.ckpt next to it
    rgt_setup(CFG)    the spec's setup, every session (the runtime is rebuilt each time)
    rgt_run(CFG)      the job, RGT_CKPT_DIR on Drive; answers rgt.ckpt's flush requests with
                      drive.flush_and_unmount() + mount (NB1); state.json + log on Drive
    rgt_finish(CFG)   outputs and their manifest to Drive, final state, flush_and_unmount

Running every cell again after a disconnect (NB5) starts the job again; it resumes from the
newest checkpoint that verifies in its home on Drive.

Drive layout (under MyDrive; the laptop reads the same folder through its Drive sync folder):

    rgt/<run-id>/code.tar.gz      the workdir as `rgt run` bundled it (absent for a git source)
    rgt/<run-id>/state.json       status, sessions, heartbeat, exit code (written atomically)
    rgt/<run-id>/log.txt          the job's output, copied from scratch every heartbeat
    rgt/<run-id>/out/...          the declared outputs, copied at the end (as RGT_OUT_DIR on
                                  every other platform: `rgt pull` fetches the same folder)
    rgt/<run-id>/MANIFEST.jsonl   path, bytes, sha256 of out/ (rgt.onbox.manifest's format),
                                  hashed from Drive: `rgt pull` checks the sync folder by it
    rgt/jobs/<job>/ckpt/          the job's checkpoint home, shared by all its runs
"""

import base64
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time

MOUNT = "/content/drive"


def _content():
    # The runtime's scratch disk; a test points it elsewhere.
    return os.environ.get("RGT_COLAB_CONTENT", "/content")


def _mountpoint():
    return os.environ.get("RGT_COLAB_MOUNT") or os.path.join(_content(), "drive")


def _drive_root():
    return os.path.join(_mountpoint(), "MyDrive")


def _run_dir(cfg):
    return os.path.join(_drive_root(), "rgt", cfg["run_id"])


def _ckpt_home(cfg):
    return os.path.join(_drive_root(), "rgt", "jobs", cfg["job"], "ckpt")


def _scratch(cfg):
    return os.path.join(_content(), "rgt", cfg["run_id"])


class RgtError(Exception):
    """One line the user can act on; the notebook stops at the cell that raised it."""


def _write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_state(cfg):
    try:
        with open(os.path.join(_run_dir(cfg), "state.json"), encoding="utf-8") as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_state(cfg, **fields):
    state = _read_state(cfg)
    state.update(fields, run_id=cfg["run_id"], job=cfg["job"], heartbeat=time.time())
    _write_atomic(os.path.join(_run_dir(cfg), "state.json"),
                  json.dumps(state, indent=1, sort_keys=True).encode())
    return state


def rgt_mount(cfg):
    try:
        from google.colab import drive
    except ImportError:
        raise RgtError("this notebook runs on Google Colab (google.colab is missing): open it "
                       "there with File > Open notebook > Google Drive") from None
    try:
        drive.mount(_mountpoint())
    except Exception as err:  # noqa: BLE001 - any refusal: say what to do
        raise RgtError(f"Google Drive is not mounted ({type(err).__name__}: {err}). The run "
                       "keeps its checkpoints and results only on Drive, so nothing starts "
                       "without it: run this cell again and allow access to Drive") from None
    if not os.path.isdir(_drive_root()):
        raise RgtError(f"Drive mounted but {_drive_root()} is missing: mount it again "
                       "(Runtime > Restart session, then Run all)")
    run_dir = _run_dir(cfg)
    os.makedirs(run_dir, exist_ok=True)
    os.makedirs(_ckpt_home(cfg), exist_ok=True)
    sessions = int(_read_state(cfg).get("sessions") or 0) + 1
    _write_state(cfg, status="starting", sessions=sessions, session_started=time.time())
    print(f"rgt: Drive mounted; run folder {run_dir} (session {sessions})")
    return run_dir


def _untar_b64(blob, dest):
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(blob)), mode="r:gz") as tar:
        _safe_extract(tar, dest)


def _safe_extract(tar, dest):
    dest = os.path.realpath(dest)
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(dest, member.name))
        if not (target == dest or target.startswith(dest + os.sep)) or member.issym() \
                or member.islnk() or member.isdev():
            raise RgtError(f"refusing bundle entry {member.name!r}")
    tar.extractall(dest)


def rgt_restore(cfg):
    scratch = _scratch(cfg)
    work = os.path.join(scratch, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    source = cfg["source"]
    if source["kind"] == "bundle":
        bundle = os.path.join(_run_dir(cfg), source["name"])
        if not os.path.isfile(bundle):
            raise RgtError(f"the code bundle {bundle} is not on Drive yet: wait until your Drive "
                           "sync folder has uploaded it, then run this cell again")
        digest = hashlib.sha256()
        with open(bundle, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != source["sha256"]:
            raise RgtError("the code bundle on Drive is not the one rgt wrote (sha256 differs; "
                           "still uploading?): wait a minute and run this cell again")
        with tarfile.open(bundle, mode="r:gz") as tar:
            _safe_extract(tar, work)
    elif source["kind"] == "inline":  # `rgt render`: the workdir travels in the notebook
        blob = base64.b64decode(source["data"])
        if hashlib.sha256(blob).hexdigest() != source["sha256"]:
            raise RgtError("the code embedded in this notebook was changed (sha256 differs): "
                           "render it again with `rgt render`")
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            _safe_extract(tar, work)
    elif source["kind"] == "git":
        subprocess.check_call(["git", "clone", "--quiet", source["url"], work])
        if source.get("commit"):
            subprocess.check_call(["git", "-C", work, "checkout", "--quiet", source["commit"]])
    else:
        raise RgtError("unknown code source {!r}".format(source["kind"]))
    lib = os.path.join(scratch, "lib")
    shutil.rmtree(lib, ignore_errors=True)
    os.makedirs(lib)
    _untar_b64(cfg["lib"], lib)
    print(f"rgt: workdir ready at {work}")
    return work


def _job_env(cfg):
    scratch = _scratch(cfg)
    env = dict(os.environ)
    env.update(cfg.get("env") or {})
    env.update({
        "RGT_RUN_ID": cfg["run_id"],
        "RGT_JOB": cfg["job"],
        "RGT_CKPT_DIR": _ckpt_home(cfg),
        "RGT_DURABLE_DIR": _run_dir(cfg),
        "RGT_CKPT_FLUSH_DIR": os.path.join(scratch, "flush"),
        "PYTHONPATH": os.pathsep.join(
            [os.path.join(scratch, "lib")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                              else [])),
        "PYTHONUNBUFFERED": "1",
    })
    return env


def rgt_setup(cfg):
    if not cfg.get("setup"):
        return
    work = os.path.join(_scratch(cfg), "work")
    rc = subprocess.call(["bash", "-c", cfg["setup"]], cwd=work, env=_job_env(cfg))
    if rc != 0:
        _write_state(cfg, status="failed", exit_code=rc, ended=time.time(),
                     cause=f"setup exited {rc}")
        raise RgtError(f"setup exited {rc}; fix it and Run all again (checkpoints on Drive "
                       "are untouched)")


def _flush_drive():
    from google.colab import drive

    drive.flush_and_unmount()
    drive.mount(_mountpoint())


def _copy_log(cfg, log_path):
    try:
        with open(log_path, "rb") as f:
            data = f.read()
    except OSError:
        return
    _write_atomic(os.path.join(_run_dir(cfg), "log.txt"), data)


def _answer_flushes(cfg, channel, log_path):
    try:
        names = sorted(n for n in os.listdir(channel) if n.endswith(".request"))
    except FileNotFoundError:
        return
    for name in names:
        answer = {"ok": True}
        try:
            _copy_log(cfg, log_path)
            _write_state(cfg)
            _flush_drive()
        except Exception as err:  # noqa: BLE001 - the trainer keeps its older checkpoints
            answer = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        done = os.path.join(channel, name[: -len(".request")] + ".done")
        _write_atomic(done, json.dumps(answer).encode())


def _pump(stream, log_path):
    with open(log_path, "ab") as log:
        for line in iter(stream.readline, b""):
            log.write(line)
            log.flush()
            sys.stdout.write(line.decode("utf-8", "replace"))
            sys.stdout.flush()


def rgt_run(cfg):
    scratch = _scratch(cfg)
    work = os.path.join(scratch, "work")
    channel = os.path.join(scratch, "flush")
    os.makedirs(channel, exist_ok=True)
    log_path = os.path.join(scratch, "log.txt")
    if os.path.isfile(os.path.join(_run_dir(cfg), "log.txt")) and not os.path.exists(log_path):
        shutil.copyfile(os.path.join(_run_dir(cfg), "log.txt"), log_path)  # earlier sessions
    with open(log_path, "ab") as log:
        log.write(("rgt: session {} started {}\n".format(
            _read_state(cfg).get("sessions"), time.strftime("%Y-%m-%d %H:%M:%S"))).encode())
    proc = subprocess.Popen(["bash", "-c", cfg["run"]], cwd=work, env=_job_env(cfg),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _write_state(cfg, status="running", pid=proc.pid, started=time.time(), exit_code=None)
    pump = threading.Thread(target=_pump, args=(proc.stdout, log_path), daemon=True)
    pump.start()
    beat = float(cfg.get("heartbeat_s") or 30)
    last = time.monotonic()
    while proc.poll() is None:
        _answer_flushes(cfg, channel, log_path)
        if time.monotonic() - last >= beat:
            _copy_log(cfg, log_path)
            _write_state(cfg)
            last = time.monotonic()
        time.sleep(0.05)
    pump.join(timeout=10)
    _answer_flushes(cfg, channel, log_path)
    rc = proc.returncode
    status = "succeeded" if rc == 0 else ("preempted" if rc == 85 else "failed")
    _copy_log(cfg, log_path)
    _write_state(cfg, status="finishing" if rc == 0 else status, exit_code=rc,
                 job_ended=time.time())
    if rc != 0:
        _write_state(cfg, ended=time.time())
        from google.colab import drive

        drive.flush_and_unmount()
        raise RgtError(f"the job exited {rc} ({status}); its checkpoints are on Drive: fix the "
                       "cause and Run all again to resume")
    return rc


def _outputs(work, patterns):
    found = []
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(work, pattern), recursive=True)):
            if os.path.isdir(path) and not os.path.islink(path):
                for here, _dirs, names in os.walk(path):
                    found.extend(os.path.join(here, n) for n in sorted(names))
            elif os.path.isfile(path):
                found.append(path)
    return found


def _sha256(path):
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def rgt_finish(cfg):
    work = os.path.join(_scratch(cfg), "work")
    run_dir = _run_dir(cfg)
    out_root = os.path.join(run_dir, "out")
    lines, total = [], 0
    missing = []
    for pattern in cfg.get("outputs") or []:
        if not _outputs(work, [pattern]):
            missing.append(pattern)
    for path in _outputs(work, cfg.get("outputs") or []):
        rel = os.path.relpath(path, work).replace(os.sep, "/")
        dest = os.path.join(out_root, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(path, dest + ".rgt-tmp")
        os.replace(dest + ".rgt-tmp", dest)
        size, digest = _sha256(dest)  # read back from Drive, not from scratch
        total += size
        lines.append({"path": "out/" + rel, "bytes": size, "sha256": digest})
    lines.sort(key=lambda e: e["path"])
    head = {"manifest_version": 2, "created": round(time.time(), 3), "root": run_dir,
            "patterns": ["out"]}
    end = {"end": True, "count": len(lines), "total_bytes": total, "missing": missing,
           "seconds": 0}
    _write_atomic(os.path.join(run_dir, "MANIFEST.jsonl"), "".join(
        json.dumps(r, sort_keys=True) + "\n" for r in [head] + lines + [end]).encode())
    _write_state(cfg, status="succeeded", ended=time.time(), outputs_missing=missing)
    from google.colab import drive

    drive.flush_and_unmount()
    print(f"rgt: done; {len(lines)} output file(s), {total} bytes, in {run_dir}. Drive flushed "
          "and unmounted: `rgt pull` can fetch them once your Drive sync folder shows them.")
