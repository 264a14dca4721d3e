"""The Slurm platform's pure parts: script text, option maths, state mapping (no cluster)."""

from __future__ import annotations

import subprocess

import pytest

from rgt.errors import UserError
from rgt.platforms.slurm.accounting import mem_advice_mb, parse_records, summarize_jobs
from rgt.platforms.slurm.audit import (
    audit_verdicts,
    classify_filesystems,
    gpus_in_gres,
    parse_sinfo,
)
from rgt.platforms.slurm.options import (
    array_range,
    dependency_option,
    grid_cells,
    lead_for,
    signal_lead,
    slurm_mem,
    slurm_time,
)
from rgt.platforms.slurm.platform import SlurmPlatform
from rgt.platforms.slurm.script import (
    ScriptPaths,
    grid_command,
    render_array_script,
    render_batch_script,
    torchrun_command,
)
from rgt.spec import JobSpec

PATHS = ScriptPaths("/data/rgt/r1", "/data/rgt/r1/code", "/scratch/rgt/r1/ckpt",
                    "/scratch/rgt/r1", "/data/rgt/r1/slurm-%j.out")


def spec(**fields) -> JobSpec:
    base = {"name": "mlp", "run": "python train.py --ckpt-dir $RGT_CKPT_DIR",
            "resources": {"time": "01:00:00", "mem": "16G", "cpus": 4}}
    return JobSpec.model_validate({**base, **fields})


def bash_n(script: str) -> None:
    result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def directives(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines()
            if line.startswith("#SBATCH ")]


def test_signal_lead_is_checkpoint_time_plus_jitter():
    assert signal_lead() == 90
    assert signal_lead(300) == 360
    assert signal_lead(12.2, jitter_s=0) == 13
    with pytest.raises(ValueError):
        signal_lead(-1)
    assert lead_for({"RGT_CKPT_WRITE_S": "45"}) == 105
    assert lead_for({"RGT_CKPT_WRITE_S": "5", "RGT_SLURM_SIGNAL_JITTER_S": "10"}) == 15
    assert lead_for({"RGT_SLURM_SIGNAL_LEAD_S": "50", "RGT_CKPT_WRITE_S": "999"}) == 50
    with pytest.raises(UserError):
        lead_for({"RGT_CKPT_WRITE_S": "soon"})


def test_time_and_mem_conversions():
    assert slurm_time("01:30:00") == "01:30:00"
    assert slurm_time("2-00:00:00") == "2-00:00:00"
    assert slurm_time("90") == "90"
    assert slurm_time("90m") == "01:30:00"
    assert slurm_time("45s") == "00:01:00"  # one-minute granularity
    assert slurm_time("2h") == "02:00:00"
    with pytest.raises(UserError):
        slurm_time("soon")
    assert slurm_mem("16G") == "16G"
    assert slurm_mem("16GiB") == "16G"
    assert slurm_mem("1.5G") == "1536M"
    assert mem_advice_mb(1024 * 1000) == 1200


def test_batch_script_directives_and_step():
    script = render_batch_script(
        spec(resources={"time": "00:10:00", "mem": "16G", "cpus": 4, "gpu": "A100:2"},
             env={"RGT_CKPT_WRITE_S": "30", "RGT_SLURM_SBATCH_ARGS": "--partition=gpu"}),
        run_id="r1", paths=PATHS, hook="module load cuda")
    d = directives(script)
    for expected in ("--job-name=mlp", "--output=/data/rgt/r1/slurm-%j.out",
                     "--open-mode=append", "--time=00:10:00", "--mem=16G",
                     "--cpus-per-task=4", "--gres=gpu:2", "--requeue", "--signal=B:TERM@90",
                     "--partition=gpu"):
        assert expected in d, (expected, d)
    assert script.startswith("#!/bin/bash\n")
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert '-c "${SLURM_CPUS_PER_TASK:-1}"' in srun  # SLURM3
    assert "--gres=gpu:2" in srun
    assert "module load cuda" in script and "if type module >/dev/null 2>&1; then" in script
    assert "trap 'rgt_forward TERM' TERM" in script
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script
    # a cancel (Requeue=0, or a plain scancel) is asked about before any requeue
    assert script.index("if rgt_cancelled; then") < script.index("scontrol requeue")
    assert '*" Requeue=0 "*) return 0' in script
    assert "export RGT_CKPT_DIR=/scratch/rgt/r1/ckpt" in script
    bash_n(script)


def test_no_gpu_means_no_gres_and_hook_from_spec_env():
    script = render_batch_script(
        spec(env={"RGT_SLURM_HOOK": "apptainer exec img.sif true"}), run_id="r1", paths=PATHS,
        hook="module load cuda")
    assert not any(d.startswith("--gres") for d in directives(script))
    assert "apptainer exec img.sif true" in script and "module load cuda" not in script
    bash_n(script)


def test_script_quotes_env_and_secrets_stay_out():
    script = render_batch_script(
        spec(env={"NOTE": "it's $HOME; `rm -rf /`"}, secrets=["WANDB_API_KEY"]),
        run_id="r1", paths=PATHS)
    assert "export NOTE='it'\"'\"'s $HOME; `rm -rf /`'" in script
    assert "WANDB_API_KEY" not in script
    bash_n(script)


HOSTILE = " 'q\" $(touch pwned) `touch pwned2` $HOME a=b ünï "


def test_secrets_are_read_byte_for_byte_never_evaluated_and_removed(tmp_path):
    paths = ScriptPaths(str(tmp_path), str(tmp_path), str(tmp_path / "ckpt"),
                        str(tmp_path), str(tmp_path / "log"))
    script = render_batch_script(spec(secrets=["TOK", "TWO"]), run_id="r1", paths=paths)
    assert ". " + str(tmp_path) not in script  # never sourced
    start = script.index("if [ -f ")
    block = script[start:script.index("\nfi\n", start) + 4]
    (tmp_path / "secrets.env").write_bytes(f"TOK={HOSTILE}\nTWO=x=y".encode())
    out = subprocess.run(["bash", "-c", block + 'printf "%s|%s" "$TOK" "$TWO" >vals'],
                         cwd=tmp_path, capture_output=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "vals").read_text() == HOSTILE + "|x=y"
    assert not list(tmp_path.glob("pwned*"))
    assert f"rm -f {tmp_path}/secrets.env" in script  # when the run ends …
    requeue = script.index("scontrol requeue")
    assert script.rindex("rm -f " + str(tmp_path)) > requeue  # … not before a requeue
    cancelled = script.index("if rgt_cancelled; then")  # … or once it is cancelled
    assert cancelled < script.index("rm -f " + str(tmp_path)) < script.index('exit "$rgt_rc"',
                                                                             cancelled)
    bash_n(script)


@pytest.mark.parametrize("run", [
    "printf '%s\\n' {v} >got",
    "printf '%s\\n' '{v}' >got",
    "printf '%s\\n' \"{v}\" >got",
    "printf '%s\\n' \"pre-{v}\" >got",
    "printf '%s\\n' 'a {{b}} '{v} >got",
])
def test_grid_values_reach_the_command_as_data(tmp_path, run):
    cells = {"v": [HOSTILE]}
    script, _ = render_array_script(spec(run=run), cells, run_id="r1", paths=PATHS)
    assert "pwned" not in script.split("esac")[-1]  # values are not pasted into the command
    command = grid_command(run, cells)
    out = subprocess.run(["bash", "-c", 'eval "$C"'], cwd=tmp_path, capture_output=True,
                         timeout=10,
                         env={"C": command, "RGT_PARAM_V": HOSTILE, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    got = (tmp_path / "got").read_text().rstrip("\n")
    assert got.endswith(HOSTILE) and not list(tmp_path.glob("pwned*"))
    assert got in (HOSTILE, "pre-" + HOSTILE, "a {b} " + HOSTILE)


def test_outputs_are_copied_to_the_durable_tier():
    script = render_batch_script(spec(outputs=["out/", "logs/*.json", "odd name"]),
                                 run_id="r1", paths=PATHS)
    assert "for rgt_o in out/ logs/*.json 'odd name'; do" in script
    bash_n(script)


def test_multinode_uses_torchrun_with_the_head_node():
    script = render_batch_script(
        spec(run="python -m trainer.main --lr 3e-4",
             resources={"nodes": 2, "gpu": "H100:8", "cpus": 32}),
        run_id="r1", paths=PATHS)
    d = directives(script)
    assert "--nodes=2" in d and "--ntasks-per-node=1" in d
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in script
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert "--nodes=$SLURM_NNODES --ntasks-per-node=1" in srun
    for part in ("torchrun --nnodes=$RGT_NUM_NODES", "--nproc-per-node=8",
                 "--node-rank=$RGT_NODE_RANK", "--master-addr=$RGT_HEAD_NODE",
                 "--master-port=29500",
                 "-m trainer.main --lr 3e-4"):
        assert part in script, part
    bash_n(script)


def test_torchrun_command_forms():
    assert torchrun_command("python3 t.py --x 1", 2, port=1234).endswith(
        "--master-addr=$RGT_HEAD_NODE --master-port=1234 t.py --x 1")
    assert "--no-python ./run.sh" in torchrun_command("./run.sh", 1)
    assert torchrun_command("torchrun --standalone t.py", 4) == \
        "torchrun --standalone t.py"


def test_array_script_cells_and_parallel_cap():
    s = spec(run="python train.py --lr {lr} --seed {seed} --out $RGT_CELL_DIR/out")
    script, cells = render_array_script(
        s, {"lr": [0.1, 0.01], "seed": [0, 1]}, run_id="r1", paths=PATHS, max_parallel=2)
    assert cells == [{"lr": 0.1, "seed": 0}, {"lr": 0.1, "seed": 1},
                     {"lr": 0.01, "seed": 0}, {"lr": 0.01, "seed": 1}]
    assert "--array=0-3%2" in directives(script)
    assert "  3) export RGT_PARAM_LR=0.01 RGT_PARAM_SEED=1 ;;" in script
    assert '--lr "${RGT_PARAM_LR}" --seed "${RGT_PARAM_SEED}" --out $RGT_CELL_DIR/out' in script
    assert 'export RGT_CKPT_DIR="$RGT_CELL_DIR/ckpt"' in script
    bash_n(script)
    with pytest.raises(UserError):
        render_array_script(spec(run="python t.py --x {nope}"), {"lr": [1]},
                            run_id="r", paths=PATHS)


def test_grid_array_and_dependency_helpers():
    assert len(grid_cells({"a": [1, 2, 3], "b": ["x", "y"]})) == 6
    with pytest.raises(UserError):
        grid_cells({"a": []})
    with pytest.raises(UserError):
        grid_cells({"a": "abc"})
    assert array_range(16, 4) == "0-15%4"
    assert array_range(1) == "0-0"
    assert dependency_option("123") == "--dependency=afterok:123"
    assert dependency_option(["1", "2"], "afterany") == "--dependency=afterany:1:2"
    with pytest.raises(UserError):
        dependency_option("abc")
    script = render_batch_script(spec(), run_id="r", paths=PATHS,
                                 dependency=dependency_option("77"))
    assert "--dependency=afterok:77" in directives(script)
    bash_n(script)


# ----------------------------------------------------------------------------- state mapping

LINE = ("JobId=42 JobName=mlp UserId=root(0) Priority=1 Account=(null) JobState={state} "
        "Reason={reason} Dependency=(null) Requeue=1 Restarts={restarts} BatchFlag=1 "
        "ExitCode={exit} RunTime=00:00:10 TimeLimit=00:01:00 "
        "StartTime=2026-01-01T10:00:00 EndTime=2026-01-01T10:01:00 "
        "Command=/data/rgt/r1/job.sbatch StdOut=/data/rgt/r1/slurm-42.out")


def summary(state, reason="None", exit="0:0", restarts=0, log=""):
    records = parse_records(LINE.format(state=state, reason=reason, exit=exit,
                                        restarts=restarts))
    return summarize_jobs(records, log)


def test_parse_records():
    rec = parse_records(LINE.format(state="RUNNING", reason="None", exit="0:0",
                                    restarts=1))[0]
    assert rec["JobState"] == "RUNNING" and rec["Restarts"] == "1"
    assert rec["StdOut"] == "/data/rgt/r1/slurm-42.out" and rec["Account"] == "(null)"


def test_state_mapping():
    s = summary("PENDING", reason="Resources")
    assert s["status"] == "starting" and "PENDING (Resources)" in s["causes"][0]
    s = summary("PENDING", reason="BeginTime", restarts=1)
    assert "requeued 1×" in s["causes"][0]
    s = summary("RUNNING", log="fresh start\nstep=10 loss=0.5 lr=0.1\npreempted step=11 x=y\n")
    assert s["status"] == "running" and s["metrics"] == "step=10 loss=0.5 lr=0.1"
    assert s["ended"] is None and s["exit_code"] is None
    s = summary("COMPLETED")
    assert s["status"] == "succeeded" and s["exit_code"] == 0 and s["duration"] == 60
    s = summary("TIMEOUT", exit="0:15")
    assert s["status"] == "preempted" and "walltime" in s["causes"][0]
    assert "scontrol requeue 42" in s["advice"]
    for state in ("PREEMPTED", "NODE_FAIL"):
        s = summary(state)
        assert s["status"] == "preempted" and "requeue" in s["advice"]
    s = summary("FAILED", exit="0:9")
    assert s["status"] == "failed" and s["signal"] == 9 and "SIGKILL" in s["causes"][0]
    s = summary("FAILED", exit="3:0")
    assert s["status"] == "failed" and s["exit_code"] == 3 and "exit code 3" in s["causes"][0]
    s = summary("FAILED", exit="85:0")
    assert s["status"] == "preempted"
    s = summary("CANCELLED", reason="None")
    assert s["status"] == "cancelled"
    assert set(s) >= {"status", "exit_code", "signal", "started", "ended", "duration",
                      "heartbeat_age", "causes", "advice", "probe_warnings", "sync", "error",
                      "metrics", "log_tail", "disks"}


def test_oom_gets_slurm4_advice():
    log = ("slurmstepd-vm: error: StepId=42.0 exceeded memory limit (314572800 > 209715200), "
           "being killed\n")  # 22.05 prints bytes: 300 MiB used, 200 MiB allowed
    s = summary("OUT_OF_MEMORY", exit="0:125", log=log)
    assert s["status"] == "failed" and "SLURM4" in s["causes"][0]
    assert "360M" in s["advice"] and "do not shrink the batch" in s["advice"]
    # OverMemoryKill without cgroups ends the job FAILED 137:0; the log line still says OOM
    s = summary("FAILED", exit="137:0", log=log)
    assert s["status"] == "failed" and "SLURM4" in s["causes"][0] and "360M" in s["advice"]
    # older Slurm printed KB: the request (MinMemoryNode) tells the unit apart
    records = parse_records(LINE.format(state="FAILED", reason="None", exit="137:0",
                                        restarts=0) + " MinMemoryNode=200M")
    s = summarize_jobs(records, "Step 42.0 exceeded memory limit (307200 > 204800)")
    assert "360M" in s["advice"]
    s = summary("OUT_OF_MEMORY")
    assert "MaxRSS × 1.2" in s["advice"]


def test_array_aggregate():
    lines = "\n".join(
        LINE.format(state=state, reason="None", exit=code, restarts=0)
        .replace("JobId=42", f"JobId={42 + i} ArrayJobId=42 ArrayTaskId={i}")
        for i, (state, code) in enumerate([("COMPLETED", "0:0"), ("RUNNING", "0:0"),
                                           ("FAILED", "1:0")]))
    s = summarize_jobs(parse_records(lines))
    assert s["status"] == "running"
    assert any("42_2" in c for c in s["causes"])
    # a cancelled sweep: the record of its cells that never started has no task number
    unstarted = LINE.format(state="CANCELLED", reason="None", exit="0:0", restarts=0).replace(
        "JobId=42", "JobId=42 ArrayJobId=42 ArrayTaskId=4294967294")
    s = summarize_jobs(parse_records(unstarted))
    assert s["causes"] == ["CANCELLED (scancel)"] and "42_[cells not started]" in s["slurm"][
        "states"]


def test_platform_render_is_the_dry_run(tmp_path):
    import time

    from rgt.store import Box

    box = Box(name="hpc", profile="slurm", connection={"host": "login"}, data_dir="/d",
              durable_dir="/scratch/u", rate=None, state="up", created=time.time())
    script = SlurmPlatform().render(box, spec(), "r9")
    assert "#SBATCH --output=/d/rgt/r9/slurm-%j.out" in script
    # the job's checkpoint home, shared by every run (and requeue) of job "mlp"
    assert "export RGT_CKPT_DIR=/scratch/u/rgt/jobs/mlp/ckpt" in script
    assert "module load cuda" in script  # the profile's proxy_hook
    bash_n(script)
    sweeping = spec().model_copy(update={"grid": {"lr": [1, 2]}, "max_parallel": 1})
    sweep = SlurmPlatform().render(box, sweeping, "r9",
                                   dependency=dependency_option("41"))
    assert "#SBATCH --array=0-1%1" in sweep and "#SBATCH --dependency=afterok:41" in sweep
    assert 'export RGT_OUT_DIR="$RGT_CELL_DIR/out"' in sweep
    assert "cp -a --parents" not in sweep  # cells share the workdir: no copying from it
    bash_n(sweep)


SINFO = ["gpu*|up|2-00:00:00|12|64|512000|gpu:a100:4(S:0-1)",
         "cpu|up|7-00:00:00|40|128|256000|(null)",
         "broken line"]


def test_sinfo_partitions_and_gpus_per_node():
    gpu, cpu = parse_sinfo(SINFO)
    assert gpu["name"] == "gpu" and gpu["default"] and gpu["nodes"] == 12
    assert gpu["gpus_per_node"] == 4 and gpu["time_limit"] == "2-00:00:00"
    assert cpu["gpus_per_node"] == 0 and cpu["gres"] == "" and not cpu["default"]
    assert gpus_in_gres("gpu:v100:2,gpu:a100:8(S:0)") == 8
    assert gpus_in_gres("gpu:3") == 3


def test_filesystems_shared_or_node_local_and_slurm5_verdict():
    fs = classify_filesystems(["/home/u|nfs4|/home", "/scratch|lustre|/scratch",
                               "/tmp|xfs|/", "/home/u|nfs4|/home", "/gone|"])
    assert [(f["path"], f["shared"]) for f in fs] == [
        ("/home/u", True), ("/scratch", True), ("/tmp", False)]
    parts = parse_sinfo(SINFO)

    def slurm5(durable, partitions=parts):
        report = {"partitions": partitions, "filesystems": fs}
        (v,) = [v for v in audit_verdicts(report, durable) if v["id"] == "SLURM5"]
        return v

    assert slurm5("/scratch")["level"] == "ok"
    bad = slurm5("/tmp")
    assert bad["level"] == "warn" and "--durable-dir on a shared filesystem" in bad["message"]
    single = [{**parts[0], "nodes": 1}]
    assert slurm5("/tmp", single)["level"] == "ok"  # one node sees its own disk
    assert slurm5("/elsewhere")["level"] == "warn"  # unknown is never called safe
    none = audit_verdicts({"partitions": [], "filesystems": fs}, "/scratch")
    assert any(v["level"] == "fail" for v in none)


def test_grid_is_validated_in_the_spec():
    from pydantic import ValidationError

    from rgt.spec import JobSpec

    for bad in ({"lr": []}, {"1lr": [1]}):
        with pytest.raises(ValidationError):
            JobSpec(name="x", run="echo", grid=bad)
    with pytest.raises(ValidationError):
        JobSpec(name="x", run="echo", grid={"lr": [1]}, max_parallel=0)
