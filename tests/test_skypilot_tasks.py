"""SkyPilot task files run with the meaning SkyPilot gives them, or are refused by name
(issue 29 item 2, issue 32): SkyPilot's environment on every node, a multi-line `run` that is
never split into words, a user's own torchrun on several nodes without a rendezvous named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from boxkit import Rgt
from cli import rgt

from rgt.errors import UserError
from rgt.platforms.slurm import script as slurm
from rgt.spec import JobSpec, load_spec

DATA = Path(__file__).parent / "data" / "skypilot"
PATHS = slurm.ScriptPaths("/d/rgt/r1", "/d/rgt/r1/code", "/s/rgt/r1/ckpt", "/s/rgt/r1",
                          "/d/rgt/r1/slurm-%j.out")
SKY_ENV = ("SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES", "SKYPILOT_NUM_GPUS_PER_NODE",
           "SKYPILOT_TASK_ID", "DSTACK_NODE_RANK", "DSTACK_MASTER_NODE_IP", "RGT_NODE_RANK")


def write(tmp_path: Path, text: str, name: str = "task.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def step_of(script: str) -> str:
    """The shell text the srun step runs (what bash -c gets), unquoted by bash itself."""
    srun = next(line for line in script.split("\n") if line.startswith("srun "))
    start = script.index(srun)
    quoted = script[start + script[start:].index(" bash -o pipefail -c ") + 21:]
    quoted = quoted[:quoted.index(" &\nrgt_pid=$!")]
    return subprocess.run(["bash", "-c", f"printf %s {quoted}"], capture_output=True,
                          text=True, check=True).stdout


def test_a_skypilot_task_sees_skypilot_variables_on_a_local_box(tmp_path):
    """A run that printed `rank= nodes= gpus= ips=` and read "succeeded" now prints values."""
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    task = write(tmp_path, (
        "num_nodes: 1\n"
        "run: |\n"
        "  # the node's rank, one IP per line, head first (SkyPilot's definitions)\n"
        "  MASTER_ADDR=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\n"
        "  echo \"sky rank=$SKYPILOT_NODE_RANK nodes=$SKYPILOT_NUM_NODES"
        " gpus=$SKYPILOT_NUM_GPUS_PER_NODE head=$MASTER_ADDR task=$SKYPILOT_TASK_ID\"\n"
        "  echo \"info=$SKYPILOT_CLUSTER_INFO\"\n"
        "  cd ~/sky_workdir && echo \"wd=$PWD job=$SKYPILOT_JOB_RANK/$SKYPILOT_NUM_JOBS\"\n"
        "  echo \"dstack rank=$DSTACK_NODE_RANK of $DSTACK_NODES_NUM"
        " at $DSTACK_MASTER_NODE_IP\"\n"))
    run_id = cli.ok("run", "box", str(task), "-d").stdout.strip().splitlines()[-1]
    cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
    log = cli.ok("logs", "box", run_id).stdout
    assert f"sky rank=0 nodes=1 gpus=0 head=127.0.0.1 task={run_id}" in log, log
    assert 'info={"cloud": "local", "region": null, "zone": null}' in log
    assert "dstack rank=0 of 1 at 127.0.0.1" in log
    assert f"/{run_id}/code job=0/1" in log  # SkyPilot's ~/sky_workdir is rgt's code dir


def test_num_nodes_is_the_request_for_nodes_and_refused_on_one_machine(tmp_path):
    """`num_nodes: 2` was dropped silently; it is resources.nodes, which a one-machine box
    refuses by name before anything is pushed."""
    task = write(tmp_path, "num_nodes: 2\nresources: {accelerators: A100:8}\nrun: echo hi\n")
    spec = load_spec(task)
    assert (spec.resources.nodes, spec.resources.gpu, spec.dialect) == (2, "A100:8", "skypilot")
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    result = cli("run", "box", str(task), "-d")
    assert result.returncode == 2 and "resources.nodes 2" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_rgt_render_of_a_multi_line_run_with_an_apostrophe_is_a_script(tmp_path):
    """`rgt render train-rdzv.yaml --profile slurm` was `ValueError: No closing quotation`."""
    result = rgt("render", str(DATA / "train-rdzv.yaml"), "--profile", "slurm",
                 "--durable-dir", "/scratch/me", env={"RGT_HOME": str(tmp_path / "h")})
    assert result.returncode == 0, result.stderr
    script = result.stdout
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    step = step_of(script)
    # the task's own script, whole, once per node: no torchrun wrapped around it
    assert step.startswith("trap : TERM INT USR1\nexport RGT_NODE_RANK=\"$SLURM_NODEID\"")
    body = load_spec(DATA / "train-rdzv.yaml").run
    assert step.endswith(body) and "--no-python" not in step
    # SkyPilot runs setup on every node, before run; a failed setup fails the job
    assert "\n{\npip install -r requirements.txt\n} || { rgt_rc=$?;" in step
    assert "pip install" not in script.replace(script[script.index("srun "):], "")
    assert "#SBATCH --nodes=2" in script and "#SBATCH --gres=gpu:8" in script
    for line in ('RGT_NODE_IPS=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
                 'export RGT_NUM_NODES="$SLURM_NNODES" SKYPILOT_NUM_NODES="$SLURM_NNODES"',
                 "SKYPILOT_NUM_GPUS_PER_NODE=8"):
        assert line in script, line


def test_a_multi_line_rgt_run_on_several_nodes_runs_whole_under_torchrun():
    """An rgt spec's run, word-split before into `torchrun … --no-python cd … source …`."""
    run = ("cd src  # don't split me\nsource .venv/bin/activate\n"
           "python train.py --out \"$RGT_OUT_DIR\" && echo done")
    spec = load_spec_from({"name": "j", "run": run, "resources": {"nodes": 2, "gpu": "A100:4"}})
    step = step_of(slurm.render_batch_script(spec, run_id="r1", paths=PATHS))
    launcher = ("torchrun --nnodes=$RGT_NUM_NODES --nproc-per-node=4 --node-rank=$RGT_NODE_RANK "
                "--master-addr=$RGT_HEAD_NODE --master-port=29500 --no-python bash -c ")
    assert launcher in step
    inner = step[step.index(launcher) + len(launcher):]
    assert subprocess.run(["bash", "-c", f"printf %s {inner}"], capture_output=True,
                          text=True).stdout == run
    # one plain python line keeps its quotes and variables as the user wrote them
    one = slurm.torchrun_command('python -u train.py --out "$RGT_OUT_DIR" --tag \'a b\'', 2)
    assert one.endswith(" train.py --out \"$RGT_OUT_DIR\" --tag 'a b'")


@pytest.mark.parametrize("run,refused", [
    ("torchrun --nproc_per_node=8 train.py", True),
    ("torchrun --standalone --nproc_per_node=8 train.py", True),
    ("cd x\npython -m torch.distributed.run \\\n  --nnodes=2 train.py", True),
    ("# torchrun is started below\npython train.py", False),
    ("if ! command -v torchrun >/dev/null; then exit 1; fi\npython train.py", False),
    ("torchrun --nnodes=$SKYPILOT_NUM_NODES --node_rank=$SKYPILOT_NODE_RANK \\\n"
     "  --master_addr=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1) --master_port=8008 t.py", False),
    ("torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=$RGT_HEAD_NODE:29500 t.py", False),
])
def test_a_users_own_torchrun_on_several_nodes_needs_a_rendezvous(run, refused):
    for dialect in ("rgt", "skypilot"):
        spec = load_spec_from({"name": "j", "run": run, "dialect": dialect,
                               "resources": {"nodes": 2}})
        if refused:
            with pytest.raises(UserError, match="each node would train alone"):
                slurm.render_batch_script(spec, run_id="r1", paths=PATHS)
        else:
            script = slurm.render_batch_script(spec, run_id="r1", paths=PATHS)
            assert run in step_of(script)
        one_node = load_spec_from({"name": "j", "run": run, "dialect": dialect})
        slurm.render_batch_script(one_node, run_id="r1", paths=PATHS)  # alone is the point


def test_render_refuses_a_lone_torchrun_in_one_line(tmp_path):
    task = write(tmp_path, "num_nodes: 2\nrun: |\n  torchrun --nproc_per_node=8 train.py\n")
    result = rgt("render", str(task), "--profile", "slurm", "--durable-dir", "/s",
                 env={"RGT_HOME": str(tmp_path / "h")})
    assert result.returncode == 2 and "each node would train alone" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def load_spec_from(data: dict) -> JobSpec:
    return JobSpec.model_validate(data)


# -- issue 32: the fields SkyPilot's own examples use most -----------------------------------

def test_local_file_mounts_travel_with_the_push_and_no_workdir_pushes_nothing(
        tmp_path, monkeypatch):
    """file_mounts copy local files from the pushed folder to their place before setup; a
    task without workdir uploads nothing (the YAML's whole folder went before)."""
    project = tmp_path / "project"
    (project / "conf").mkdir(parents=True)
    (project / "conf" / "lr.txt").write_text("0.25\n")
    (project / "big.bin").write_bytes(b"\0" * 4096)
    dest = tmp_path / "on-box" / "conf"
    task = write(project, (
        f"workdir: .\nfile_mounts:\n  {dest}: ./conf\n"
        "setup: echo \"setup sees $(cat " + str(dest) + "/lr.txt)\"\n"
        "run: echo \"lr=$(cat " + str(dest) + "/lr.txt)\"\n"))
    bare = write(project, "run: |\n  echo \"here: [$(ls -A)]\"\n", "bare.yaml")
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    monkeypatch.chdir(project)  # SkyPilot reads paths from where its command runs
    for spec, said in ((task, "lr=0.25"), (bare, "here: []")):
        run_id = cli.ok("run", "box", spec.name, "-d").stdout.strip().splitlines()[-1]
        cli.ok("watch", "box", run_id, "--until-done", "--timeout", "60")
        log = cli.ok("logs", "box", run_id).stdout
        assert said in log, log
    assert (dest / "lr.txt").read_text() == "0.25\n"


def test_a_relative_workdir_is_read_from_where_rgt_runs(tmp_path, monkeypatch):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "src").mkdir()
    task = write(tmp_path / "tasks", "workdir: src\nrun: python train.py\n")
    monkeypatch.chdir(tmp_path)
    assert load_spec(task).workdir == (tmp_path / "src").resolve()
    monkeypatch.chdir(tmp_path / "tasks")
    with pytest.raises(UserError, match="read from where rgt runs"):
        load_spec(task)


def test_envs_without_a_value_come_from_this_shell_as_secrets(tmp_path, monkeypatch):
    task = write(tmp_path, "envs: {HF_TOKEN: null, WANDB_API_KEY: '', MODEL: llama}\n"
                           "run: python train.py\n")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "w")
    with pytest.raises(UserError, match=r"envs HF_TOKEN has no value in the file and is not "
                                        r"set here: `export HF_TOKEN=…`"):
        load_spec(task)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    spec = load_spec(task)
    assert spec.env == {"MODEL": "llama"} and spec.secrets == ["HF_TOKEN", "WANDB_API_KEY"]
    assert "hf_secret" not in spec.model_dump_json()  # values travel on stdin at run time


def test_candidates_and_noted_fields(tmp_path, monkeypatch):
    spec = load_spec(DATA / "any-of.yaml")
    r = spec.resources
    assert (r.gpu, r.gpu_alternatives, r.region) == ("A100:8", ["A100:8", "A100-80GB:8"], None)
    result = rgt("render", str(DATA / "any-of.yaml"), "--profile", "slurm", "--durable-dir",
                 "/s", env={"RGT_HOME": str(tmp_path / "h")})
    assert result.returncode == 0, result.stderr
    assert "resources.ports 8080 is not applied: rgt opens no port" in result.stderr
    assert "resources.disk_tier 'best' is not applied" in result.stderr


def test_sizes_fractions_and_kubernetes_images_read_as_skypilot_reads_them(tmp_path, capfd):
    path = write(tmp_path, yaml.safe_dump({"run": "x", "resources": {
        "accelerators": "T4:0.5", "disk_size": "1TB", "memory": "32GB+", "infra": "k8s",
        "image_id": "ghcr.io/org/img:1"}}))
    r = load_spec(path).resources
    assert (r.gpu, r.disk, r.mem, r.image) == ("T4:1", "1024G", "32G", "ghcr.io/org/img:1")
    assert "T4:0.5: a fraction of a GPU is taken as 1 whole GPU" in capfd.readouterr().err


@pytest.mark.parametrize("task,says", [
    ({"run": "x", "file_mounts": {"/d": {"source": "./here", "mode": "MOUNT"}}},
     "use mode: COPY"),
    ({"run": "x", "workdir": ".", "file_mounts": {"~/.ssh/id_rsa": "/etc/hostname"}},
     "is outside the folder rgt pushes"),
    ({"run": "x", "file_mounts": {"/d": "/etc/hostname", "/e": "/usr/bin/env"}},
     "share no folder but /"),
    ({"run": "x", "resources": {"infra": "gcp/us-central1"}},
     "rgt has no gcp platform; the nearest rgt profile is kubernetes (GKE)"),
    ({"run": "x", "resources": {"instance_type": "p4d.24xlarge"}},
     "is an aws instance type: rgt has no aws platform; the nearest rgt profile is kubernetes "
     "(EKS)"),
    ({"run": "x", "workdir": {"url": "https://github.com/a/b", "branch": "main"}},
     "takes `url` and an optional `ref`"),
    ({"run": "x", "config": {"kubernetes": {"pod_config": {"spec": {"containers": [
        {"securityContext": {"runAsUser": 0}}]}}}}},
     "`config.kubernetes.pod_config.spec.containers[0].securityContext.runAsUser` has no rgt "
     "equivalent: rgt's pods take only what rgt's `kubernetes:` section"),
])
def test_what_rgt_cannot_carry_is_named(tmp_path, monkeypatch, task, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    path = write(tmp_path, yaml.safe_dump(task))
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize("name,says", [
    ("pipeline.yaml", "is a SkyPilot pipeline of 2 tasks, each started once the one before "
                      "succeeded: on a local box nothing chains them"),
    ("service.yaml", "is a SkyServe service (its `service:` section): SkyServe services are "
                     "not run by rgt"),
    ("pool.yaml", "is a SkyPilot pool (`pool:`"),
])
def test_pipelines_services_and_pools_are_named_as_what_they_are(tmp_path, name, says):
    """Pipelines read "not valid YAML", pools "field `name` is required"; a pipeline on a box
    with no scheduler to chain its stages is refused before any starts."""
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    result = cli("run", "box", str(DATA / name), "-d")
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_typo_in_an_rgt_spec_is_explained_as_rgts(tmp_path):
    """`resources: {gpus: …}` made the spec "a SkyPilot task" and blamed checkpoint_dir."""
    path = write(tmp_path, "name: j\nrun: x\ncheckpoint_dir: $RGT_CKPT_DIR\n"
                           "resources: {gpus: A100:1}\n")
    with pytest.raises(UserError, match=r"`resources.gpus` is not a known field; did you mean "
                                        r"`gpu`"):
        load_spec(path)


def test_envs_are_filled_into_file_mounts_and_workdir(tmp_path, monkeypatch):
    """SkyPilot fills ${VAR} from envs into file_mounts and workdir when it reads the file;
    taken literally, a checkpoint went to a directory named '${SIZE}'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src-7b" / "conf").mkdir(parents=True)
    task = write(tmp_path, "envs: {SIZE: 7b}\nworkdir: src-$SIZE\n"
                           "file_mounts:\n  /ckpt/${SIZE}/conf: ./src-${SIZE}/conf\nrun: x\n")
    spec = load_spec(task)
    assert spec.workdir == (tmp_path / "src-7b").resolve()
    assert spec.setup.startswith("mkdir -p /ckpt/7b/conf && cp -a conf/. /ckpt/7b/conf/")
