"""rgt's Kaggle kernel runtime: the body of the script kernel `rgt run` pushes.

Standard library only, Python >= 3.8. The pushed script is ``RGT_CONFIG = {...}``, this text,
then ``main(RGT_CONFIG)``. It never lets an exception or a non-zero exit reach Kaggle: a failed
cell or script sinks the whole commit and its /kaggle/working output with it (NB2). Whatever
happens, /kaggle/working/rgt/status.json says what did, next to the log and checkpoints.

    /kaggle/working/rgt/status.json   status (succeeded|failed|continue), cause, exit code, step
    /kaggle/working/rgt/log.txt       setup's and the job's output
    /kaggle/working/rgt/ckpt/         the job's checkpoint home (RGT_CKPT_DIR): the version's
                                      output, mounted by the next attempt as input
    /kaggle/working/rgt/outputs/      the declared outputs, copied once they fit the 20 GB
    /kaggle/working/rgt/MANIFEST.jsonl path, bytes, sha256 of outputs/
    /kaggle/temp/rgt/                 the code and rgt.ckpt (scratch, NB4)

A job still running when the session budget is spent gets SIGTERM (rgt.ckpt's PreemptionFlag
saves and exits 85), then SIGKILL after the grace; the status is then `continue`: the next
attempt mounts this version's output and resumes from its checkpoint.
"""

import base64
import glob
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback


def _root():
    return os.environ.get("RGT_KAGGLE_ROOT", "/kaggle")  # a test points it elsewhere


def _paths():
    root = _root()
    rgt = os.path.join(root, "working", "rgt")
    return {"input": os.path.join(root, "input"), "working": os.path.join(root, "working"),
            "rgt": rgt, "ckpt": os.path.join(rgt, "ckpt"), "log": os.path.join(rgt, "log.txt"),
            "status": os.path.join(rgt, "status.json"),
            "scratch": os.path.join(root, "temp", "rgt")}


def _write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _status(cfg, **fields):
    p = _paths()
    try:
        with open(p["status"], encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    state.update(fields, job=cfg["job"], run_id=cfg["run_id"], attempt=cfg["attempt"],
                 updated=time.time())
    _write_atomic(p["status"], json.dumps(state, indent=1, sort_keys=True).encode())
    return state


def _say(line):
    p = _paths()
    os.makedirs(os.path.dirname(p["log"]), exist_ok=True)
    with open(p["log"], "ab") as log:
        log.write((line + "\n").encode())
    print(line, flush=True)


def _untar_b64(blob, dest):
    os.makedirs(dest, exist_ok=True)
    real = os.path.realpath(dest)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(blob)), mode="r:gz") as tar:
        for m in tar.getmembers():
            target = os.path.realpath(os.path.join(dest, m.name))
            if not target.startswith(real + os.sep) or m.issym() or m.islnk() or m.isdev():
                raise ValueError(f"refusing bundle entry {m.name!r}")
        tar.extractall(dest)


def _previous_checkpoints(cfg):
    """The previous attempt's output, mounted under /kaggle/input: its rgt/ckpt, if any. The
    previous attempt is this run's, or (a new run of the job) the run it resumes."""
    runs = (cfg["run_id"], cfg.get("resumes_run"))
    for status in sorted(glob.glob(os.path.join(_paths()["input"], "**", "rgt", "status.json"),
                                   recursive=True)):
        try:
            with open(status, encoding="utf-8") as f:
                earlier = json.load(f)
        except (OSError, ValueError):
            continue
        if earlier.get("job") == cfg["job"] and earlier.get("run_id") in runs:
            return os.path.join(os.path.dirname(status), "ckpt")
    return None


def _newest_step(ckpt):
    steps = []
    for name in os.listdir(ckpt) if os.path.isdir(ckpt) else []:
        if name.startswith("ckpt-") and name.endswith(".json"):
            try:
                steps.append(int(name[5:-5]))
            except ValueError:
                continue
    return max(steps) if steps else None


def _job_env(cfg):
    p = _paths()
    env = dict(os.environ)
    env.update(cfg.get("env") or {})
    lib = os.path.join(p["scratch"], "lib")
    env.update({"RGT_RUN_ID": cfg["run_id"], "RGT_JOB": cfg["job"], "RGT_CKPT_DIR": p["ckpt"],
                "RGT_DURABLE_DIR": p["rgt"], "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join([lib] + ([env["PYTHONPATH"]]
                                                       if env.get("PYTHONPATH") else []))})
    return env


def _tee(stream, log_path):
    with open(log_path, "ab") as log:
        for line in iter(stream.readline, b""):
            log.write(line)
            log.flush()
            sys.stdout.write(line.decode("utf-8", "replace"))
            sys.stdout.flush()


def _run(cfg, command, deadline):
    """(exit code, whether the budget ran out)."""
    p = _paths()
    proc = subprocess.Popen(["bash", "-c", command], cwd=os.path.join(p["scratch"], "work"),
                            env=_job_env(cfg), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    tee = threading.Thread(target=_tee, args=(proc.stdout, p["log"]), daemon=True)
    tee.start()
    out_of_time = False
    while proc.poll() is None:
        if deadline is not None and time.time() >= deadline and not out_of_time:
            out_of_time = True
            _say(f"rgt: the session budget is spent; SIGTERM to the job (it has "
                 f"{cfg['grace_s']:.0f}s to checkpoint)")
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(cfg["grace_s"])
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.05)
    tee.join(10)
    return proc.returncode, out_of_time


def _tree_bytes(path):
    total = 0
    for here, _dirs, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(here, n)).st_size
            except OSError:
                continue
    return total


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


def _save_outputs(cfg):
    """Copy the declared outputs into /kaggle/working if they fit; the cause if not."""
    p = _paths()
    work = os.path.join(p["scratch"], "work")
    files = _outputs(work, cfg.get("outputs") or [])
    need = sum(os.path.getsize(f) for f in files)
    have = _tree_bytes(p["working"])
    if have + need > cfg["working_limit_bytes"]:
        return (f"the outputs ({need / 1e9:.2f} GB) would take /kaggle/working to "
                f"{(have + need) / 1e9:.2f} GB, over its {cfg['working_limit_bytes'] / 1e9:.0f} GB "
                "limit; the checkpoints and the log are kept, the outputs are not")
    lines = []
    for path in files:
        rel = os.path.relpath(path, work).replace(os.sep, "/")
        dest = os.path.join(p["rgt"], "outputs", rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(path, dest)
        digest = hashlib.sha256()
        with open(dest, "rb") as f:
            for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                digest.update(chunk)
        lines.append({"path": "outputs/" + rel, "bytes": os.path.getsize(dest),
                      "sha256": digest.hexdigest()})
    missing = [pat for pat in cfg.get("outputs") or [] if not _outputs(work, [pat])]
    records = [{"manifest_version": 2, "created": round(time.time(), 3), "root": p["rgt"],
                "patterns": ["outputs"]}] + sorted(lines, key=lambda e: e["path"]) + [
        {"end": True, "count": len(lines), "total_bytes": sum(e["bytes"] for e in lines),
         "missing": missing, "seconds": 0}]
    _write_atomic(os.path.join(p["rgt"], "MANIFEST.jsonl"),
                  "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode())
    return None


def _gpu_visible():
    try:
        return subprocess.call(["nvidia-smi"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0
    except OSError:
        return False


def main(cfg):
    started = time.time()
    deadline = started + cfg["budget_s"] if cfg.get("budget_s") else None
    p = _paths()
    try:
        os.makedirs(p["ckpt"], exist_ok=True)
        _status(cfg, status="running", started=started, exit_code=None, cause=None)
        earlier = _previous_checkpoints(cfg)
        if earlier and _newest_step(p["ckpt"]) is None and os.path.isdir(earlier):
            shutil.copytree(earlier, p["ckpt"], dirs_exist_ok=True)
            _say(f"rgt: attempt {cfg['attempt']} continues from the previous version's "
                 f"checkpoints ({earlier}, newest step {_newest_step(p['ckpt'])})")
        if cfg.get("gpu") and not _gpu_visible():
            _status(cfg, status="failed", exit_code=None, ended=time.time(),
                    cause=f"no GPU in this session although the spec asks for {cfg['gpu']}: "
                          "the kernel ran with Accelerator None (NB3)")
            return 0
        _untar_b64(cfg["code"], os.path.join(p["scratch"], "work"))
        _untar_b64(cfg["lib"], os.path.join(p["scratch"], "lib"))
        if cfg.get("setup"):
            rc, _ = _run(cfg, cfg["setup"], deadline)
            if rc != 0:
                _status(cfg, status="failed", exit_code=rc, ended=time.time(),
                        cause=f"setup exited {rc}")
                return 0
        rc, out_of_time = _run(cfg, cfg["run"], deadline)
        step = _newest_step(p["ckpt"])
        # exit 0 is the job's word that it finished, even when the budget ran out while it
        # was exiting (a SIGTERM in its teardown only sets rgt.ckpt's flag): never continue it
        if rc != 0 and (out_of_time or rc == 85):
            _status(cfg, status="continue", exit_code=rc, ended=time.time(), step=step,
                    cause="the session budget ran out; the next attempt resumes from step "
                          f"{step}")
            return 0
        if rc != 0:
            _status(cfg, status="failed", exit_code=rc, ended=time.time(), step=step,
                    cause=f"the job exited {rc}")
            return 0
        problem = _save_outputs(cfg)
        _status(cfg, status="failed" if problem else "succeeded", exit_code=rc,
                ended=time.time(), step=step, cause=problem)
    except BaseException:  # noqa: BLE001 - NB2: nothing may sink the commit
        text = traceback.format_exc()
        _say(text)
        _status(cfg, status="failed", ended=time.time(),
                cause="rgt's kernel script: " + text.strip().splitlines()[-1])
    return 0
