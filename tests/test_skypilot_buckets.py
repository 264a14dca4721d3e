"""SkyPilot file_mounts from buckets and URLs, a workdir from git, and `config:` (issue 32):
copied or mounted on the box with the tool it has, cloned there, or named, never dropped."""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
from pathlib import Path

import pytest
import yaml
from boxkit import Rgt

from rgt.errors import UserError
from rgt.spec import load_spec


def write(folder: Path, data: dict, name: str = "task.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def served(tmp_path):
    """A real HTTP server on loopback, serving tmp_path/www."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_on_local_box(tmp_path: Path, task: Path) -> tuple[str, str]:
    cli = Rgt(tmp_path / "home")
    cli.ok("up", "box")
    run_id = cli.ok("run", "box", str(task), "-d").stdout.strip().splitlines()[-1]
    cli("watch", "box", run_id, "--until-done", "--timeout", "60")
    status = cli.ok("runs", "box", "--json").stdout
    return cli.ok("logs", "box", run_id).stdout, status


def test_url_copy_missing_tool_and_git_workdir_run_on_a_local_box(tmp_path, served, monkeypatch):
    """An https file mount lands before setup; an s3 mount on a box without the AWS CLI fails
    the job naming what to install (not an empty directory); a git workdir is cloned at its
    ref and the job runs in the clone."""
    www, base = served
    (www / "lr.txt").write_text("0.5\n")
    dest = tmp_path / "on-box" / "lr.txt"
    monkeypatch.chdir(tmp_path)
    fetched = write(tmp_path, {"file_mounts": {str(dest): f"{base}/lr.txt"},
                               "run": f"echo lr=$(cat {dest})"}, "fetched.yaml")
    log, _ = run_on_local_box(tmp_path / "a", fetched)
    assert "lr=0.5" in log, log

    tool = "aws" if subprocess.run(["sh", "-c", "command -v aws"]).returncode else None
    if tool:  # this machine has no AWS CLI: the job must say so and stop before `run`
        s3 = write(tmp_path, {"file_mounts": {"/tmp/rgt-s3-data": "s3://bucket/prefix"},
                              "run": "echo ran-anyway"}, "s3.yaml")
        log, runs = run_on_local_box(tmp_path / "b", s3)
        assert "to copy s3://bucket/prefix this box needs the AWS CLI" in log, log
        assert "ran-anyway" not in log and '"failed"' in runs, (log, runs)

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "train.py").write_text("print('from v1')\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "v1"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    (repo / "train.py").write_text("print('from v2')\n")
    subprocess.run([*git, "commit", "-qam", "v2"], check=True)
    cloned = write(tmp_path, {"workdir": {"url": repo.as_uri(), "ref": "v1"},
                              "run": "cd ~/sky_workdir && python3 train.py"}, "git.yaml")
    log, _ = run_on_local_box(tmp_path / "c", cloned)
    assert "from v1" in log and "from v2" not in log, log


def test_bucket_mounts_are_mapped_noted_or_refused_by_name(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    spec = load_spec(write(tmp_path, {"run": "x", "file_mounts": {
        "/artifacts": {"name": "my-ckpts", "mode": "MOUNT", "persistent": False},
        "/data": {"source": "gs://b/train/", "mode": "COPY"},
        "~/cache": "s3://b2/c"},
        "config": {"docker": {"run_options": ["--shm-size=16g"]}}}))
    said = capfd.readouterr().err
    assert "mount-s3 --allow-delete --allow-overwrite my-ckpts /artifacts" in spec.setup
    assert "gcloud storage cp -r gs://b/train/ /data" in spec.setup
    assert "aws s3 cp --only-show-errors s3://b2/c \"$HOME\"/cache" in spec.setup
    for note in ("bucket my-ckpts is taken as s3://my-ckpts", "`persistent: false` is not "
                 "honoured", "the box's own cloud credentials", "run_options '--shm-size=16g' "
                 "is not applied"):
        assert note in said, said
    for mounts, says in (
            ({"/d": {"name": None, "mode": "MOUNT"}}, "leaves the bucket's `name` empty"),
            ({"/d": {"name": "$BUCKET", "mode": "MOUNT"}}, "names its bucket by a variable"),
            ({"/d": {"name": "b", "store": "azure"}}, "store 'azure' is not one rgt"),
            ({"/d": "oci://b@region/x"}, "oci:// is not copied or mounted by rgt"),
            ({"/d": {"source": "https://h/f", "mode": "MOUNT"}}, "cannot be mounted")):
        with pytest.raises(UserError, match=None) as err:
            load_spec(write(tmp_path, {"run": "x", "file_mounts": mounts}))
        assert says in str(err.value), str(err.value)
    with pytest.raises(UserError) as err:
        load_spec(write(tmp_path, {"run": "x", "config": {"kubernetes": {"enable_docker": 1}}}))
    assert "`config.kubernetes.enable_docker` has no rgt equivalent" in str(err.value)


def test_nebius_buckets_go_through_the_aws_clis_nebius_profile(tmp_path, monkeypatch):
    """SkyPilot reaches Nebius Object Storage as S3 with the AWS CLI's `nebius` profile; the
    copy line, run by bash with an `aws` that records its words, asks for s3://BUCKET/PREFIX
    with that profile, and the mount takes the profile's endpoint."""
    monkeypatch.chdir(tmp_path)
    spec = load_spec(write(tmp_path, {"run": "x", "file_mounts": {
        "/ckpt": {"name": "runs", "store": "nebius", "mode": "MOUNT"},
        str(tmp_path / "data"): "nebius://corpus/v2"}}))
    mount, copy = [line for line in spec.setup.splitlines() if "nebius" in line]
    assert 'mount-s3 --profile nebius --endpoint-url "$(aws configure get endpoint_url ' \
           '--profile nebius)" --allow-delete --allow-overwrite runs /ckpt' in mount
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "aws").write_text("#!/bin/sh\necho \"$@\" >> \"$AWS_WORDS\"\n")
    (tools / "aws").chmod(0o755)
    words = tmp_path / "words"
    done = subprocess.run(["bash", "-c", copy], capture_output=True, text=True,
                          env={"PATH": f"{tools}:/usr/bin:/bin", "AWS_WORDS": str(words)})
    assert done.returncode == 0, done.stderr
    assert words.read_text().startswith(
        f"--profile nebius s3 cp --only-show-errors s3://corpus/v2 {tmp_path / 'data'}")
