"""Every example in README.md is tested as written (issue 29 item 4).

The README's job.yaml did not load (YAML 1.1 read `on:` as True), its nanoGPT line stopped
nanoGPT's configurator, its checkpoint example indexed an object, and `rgt render job.yaml
--profile slurm` refused its own job. Here each fenced block is taken out of the README as it
is and given to what it claims to work with:

- a job spec (```yaml with `name` and `run`): rgt's own loader, then `rgt render` for Slurm and
  Kubernetes, as the README shows (no box, no cluster). `rgt run BOX job.yaml --dry-run` is
  not run: it needs a box whose platform has the spec's A100; render prints the same script.
- a `run:` line (```yaml with only `run`): loaded as a spec's run, then run by bash as the
  runner does, with a `python` that records its argv, which must follow the rule of the
  program it names (nanoGPT's configurator: `--key=value` or a config file), before and after
  a checkpoint exists.
- shell (```bash): every command line is placed or the test fails. `rgt ...`: parsed by the
  real CLI (its verb's options, types and arguments, each [optional] part with and without);
  the ones that need no box, cloud or cluster also run for real, exit 0. `pip install
  '.[extra]'`: the extra exists; `scripts/test`: exists and runs; `export NAME=...`: rgt
  reads NAME.
- ```python: run twice in an empty directory with this rgt; the second run resumes the first.
- ```json: the frame of `rgt <verb> --json`, compared with the real output.

A block of another kind, or a command line none of these places, fails the test: a new
README example gets a test or a reason here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml
from cli import rgt

from rgt import yaml12
from rgt.cli import verbs
from rgt.spec import load_spec

try:
    from typer._click.exceptions import UsageError  # Typer 0.2x carries its own Click
except ImportError:  # pragma: no cover  (an older Typer on Click itself)
    from click.exceptions import UsageError

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# rgt verbs that need no box, cloud API or cluster: run for real, not only parsed
BOXLESS = {"profile", "profiles", "compare", "gotcha", "ls"}


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # where the block's fence is in README.md
    text: str

    def __str__(self) -> str:
        return f"README.md:{self.line} ```{self.lang}"


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [Block(m[1], text.count("\n", 0, m.start()) + 1, m[2]) for m in FENCE.finditer(text)]


def kind_of(block: Block) -> str | None:
    if block.lang == "yaml":
        data = yaml12.load(block.text)
        if isinstance(data, dict) and {"name", "run"} <= set(data):
            return "spec"
        if isinstance(data, dict) and set(data) == {"run"}:
            return "run-line"
        return None
    return {"bash": "shell", "python": "python", "json": "json"}.get(block.lang)


def blocks_of(kind: str) -> list[Block]:
    return [b for b in readme_blocks() if kind_of(b) == kind]


def by_line(blocks: list[Block]):
    return pytest.mark.parametrize("block", blocks, ids=[f"line{b.line}" for b in blocks])


def test_every_block_is_one_this_file_tests():
    blocks = readme_blocks()
    assert len(blocks) >= 12
    unplaced = [str(b) for b in blocks if kind_of(b) is None]
    assert not unplaced, f"README blocks no test here places: {unplaced}"


# ----------------------------------------------------------------------------- job specs


def project(tmp_path: Path, spec: str) -> Path:
    (tmp_path / "train.py").write_text("print('training')\n")
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "job.yaml").write_text(spec)
    return tmp_path / "job.yaml"


@by_line(blocks_of("spec"))
def test_the_job_spec_loads_and_renders(block, tmp_path):
    path = project(tmp_path, block.text)
    spec = load_spec(path)
    raw = yaml12.load(block.text)
    if "recover" in raw:  # `on:` is a key (YAML 1.2), not True
        assert spec.recover.on == raw["recover"]["on"]
    assert spec.env == {k: str(v) for k, v in (raw.get("env") or {}).items()}
    home = {"RGT_HOME": str(tmp_path / "home")}
    slurm = rgt("render", str(path), "--profile", "slurm", env=home)
    assert slurm.returncode == 0, slurm.stderr
    assert slurm.stdout.startswith("#!/bin/bash") and "#SBATCH --requeue" in slurm.stdout
    if spec.resources.gpu_count:
        assert f"#SBATCH --gres=gpu:{spec.resources.gpu_count}" in slurm.stdout
    if spec.resources.disk:
        assert f"#SBATCH --tmp={spec.resources.disk}" in slurm.stdout
    image = "registry.example/train@sha256:" + "0" * 64
    kube = rgt("render", str(path), "--profile", "kubernetes", "--image", image, env=home)
    assert kube.returncode == 0, kube.stderr
    assert "kind: Job" in kube.stdout and "restartPolicy: Never" in kube.stdout


# ----------------------------------------------------------------------------- run lines


def nanogpt_accepts(arg: str) -> bool:
    """nanoGPT's configurator.py (karpathy/nanoGPT) reads each argument either as a config
    file (no '=', and then it asserts the name does not start with '--') or as --key=value
    (it asserts the '--', and unpacks the split on '=' into exactly two)."""
    if "=" not in arg:
        return not arg.startswith("--")
    return arg.startswith("--") and arg.count("=") == 1


@by_line(blocks_of("run-line"))
def test_a_run_line_loads_and_passes_its_program_what_it_reads(block, tmp_path):
    run = yaml12.load(block.text)["run"]
    path = project(tmp_path, yaml.safe_dump({"name": "nanogpt", "workdir": ".", "run": run}))
    assert load_spec(path).run == run
    assert "train.py" in run and "--out_dir" in run, "a new recipe needs its program's rule"
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python").write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[2:]))\n")
    (shims / "python").chmod(0o755)
    home = tmp_path / "jobs" / "nano gpt" / "ckpt"  # a space: the quoting must hold
    home.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "RGT_CKPT_DIR": str(home)}

    def argv() -> list[str]:
        subprocess.run(["bash", "-c", run], cwd=tmp_path, env=env, check=True, timeout=30)
        return json.loads((tmp_path / "argv.json").read_text())

    fresh = argv()
    assert fresh == [f"--out_dir={home}"], fresh
    (home / "ckpt.pt").write_bytes(b"a checkpoint")
    resumed = argv()
    assert resumed == [f"--out_dir={home}", "--init_from=resume"], resumed
    assert all(nanogpt_accepts(arg) for arg in fresh + resumed)


# ----------------------------------------------------------------------------- shell


def command_lines(script: str) -> list[str]:
    """The script's commands: continuations joined, comments dropped, split at && and ;."""
    joined = re.sub(r"\\\n\s*", " ", script)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", ";"):
                if command:
                    commands.append(shlex.join(command))
                command = []
            else:
                command.append(word.rstrip(";"))
                if word.endswith(";"):
                    commands.append(shlex.join(command))
                    command = []
    return commands


def variants(words: list[str]) -> list[list[str]]:
    """A command with `[...]` parts as the README writes optional ones: without them, and
    with each alternative (`[A | B]`) of every part in turn."""
    plain: list[str | list[list[str]]] = []  # words, and each [...] part as its alternatives
    part: list[str] | None = None
    for word in words:
        if part is None and word.startswith("["):
            part, word = [], word[1:]
        if part is None:
            plain.append(word)
            continue
        closes = word.endswith("]")
        part.append(word[:-1] if closes else word)
        if closes:
            alternatives, current = [], []
            for w in part:
                if w == "|":
                    alternatives.append(current)
                    current = []
                elif w:
                    current.append(w)
            plain.append([*alternatives, current])
            part = None
    assert part is None, f"an unclosed [ in {words}"
    parts = [w for w in plain if isinstance(w, list)]
    if not parts:
        return [words]
    out = [[w for w in plain if isinstance(w, str)]]
    for i in range(max(len(alts) for alts in parts)):
        out.append([x for w in plain for x in
                    ([w] if isinstance(w, str) else w[min(i, len(w) - 1)])])
    return out


def parse(args: list[str]) -> None:
    """Parse `rgt ARGS` with the real CLI's verb, as a run would, without running it: every
    option must exist, every value convert, every required argument be there."""
    name, *rest = args
    command = verbs.load(name)
    parent = typer.Context(command, info_name="rgt")
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        parent = typer.Context(command, info_name=name, parent=parent)
        name, *rest = rest
        command = command.commands[name]
    command.make_context(name, list(rest), parent=parent)


def check_command(command: str, tmp_path: Path) -> None:
    words = shlex.split(command)
    if words[0] == "rgt":
        for args in variants(words[1:]):
            try:
                parse(args)
            except UsageError as err:
                raise AssertionError(f"`{shlex.join(['rgt', *args])}`: {err}") from None
            if args[0] in BOXLESS and "--box" not in args or args[:2] == ["top", "--once"]:
                done = rgt(*args, env={"RGT_HOME": str(tmp_path / "home")})
                assert done.returncode == 0, (args, done.stdout, done.stderr)
    elif words[:2] == ["pip", "install"]:
        pyproject = (ROOT / "pyproject.toml").read_text()
        for extra in re.findall(r"\[(\w+)\]", command):
            assert re.search(rf"^{extra} = \[", pyproject, re.MULTILINE), (command, extra)
    elif words == ["scripts/test"]:
        assert os.access(ROOT / "scripts" / "test", os.X_OK)
    elif words[0] == "export" and len(words) == 2 and "=" in words[1]:
        name = words[1].split("=")[0]
        sources = "".join(p.read_text() for p in (ROOT / "src" / "rgt").rglob("*.py"))
        assert f'"{name}"' in sources, f"README exports {name}, which rgt never reads"
    else:
        raise AssertionError(f"a README shell line no test places: {command!r}")


@by_line(blocks_of("shell"))
def test_every_shell_line_is_a_real_command(block, tmp_path):
    commands = command_lines(block.text)
    assert commands
    for command in commands:
        check_command(command, tmp_path)


def test_the_placer_fails_what_it_cannot_check(tmp_path):
    with pytest.raises(AssertionError, match="no test places"):
        check_command("curl https://example.com | sh", tmp_path)
    with pytest.raises(AssertionError, match="No such option"):
        check_command("rgt watch a100 --folow", tmp_path)
    with pytest.raises(AssertionError, match="never reads"):
        check_command("export RGT_NO_SUCH_KEY=1", tmp_path)
    assert command_lines("rgt watch c; rgt pull c && rgt down c  # x") == [
        "rgt watch c", "rgt pull c", "rgt down c"]
    assert variants(["up", "k", "[--a", "A]", "[--b", "B", "|", "--c", "C]"]) == [
        ["up", "k"], ["up", "k", "--a", "A", "--b", "B"], ["up", "k", "--a", "A", "--c", "C"]]


def test_verbs_the_prose_names_exist():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"`rgt ([a-z][a-z-]*)", text))
    assert named and named <= set(verbs.BY_NAME), named - set(verbs.BY_NAME)
    # the lifecycle line, `up → audit → run (push + detach) → … → verify → down`: verbs all
    lifecycle = next(line for line in text.splitlines() if line.startswith("    up → "))
    steps = [re.sub(r"\(.*?\)", "", step).strip() for step in lifecycle.split("→")]
    assert len(steps) >= 6 and set(steps) <= set(verbs.BY_NAME), steps


# ----------------------------------------------------------------------------- python, json


@by_line(blocks_of("python"))
def test_the_python_block_runs_and_resumes(block, tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "example.py").write_text(block.text)
    first = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    # the second run must find the first's checkpoint and go on from it (one process less:
    # the block runs as a file would, then its own names are read)
    again = ("exec(compile(open('example.py').read(), 'example.py', 'exec')); "
             "l = Checkpointer('ckpt').load_latest(); print(start, l.step, l.state['w'].tolist())")
    second = subprocess.run([sys.executable, "-c", again], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert second.stdout.split(None, 2) == ["3", "5", "[6.0, 6.0, 6.0, 6.0]\n"], second.stderr


@by_line(blocks_of("json"))
def test_the_json_frame_is_what_the_verb_prints(block, tmp_path):
    shown = json.loads(block.text)
    real = json.loads(rgt(shown["verb"], "--json", env={"RGT_HOME": str(tmp_path)}).stdout)
    assert set(real) == set(shown) and real["schema"] == shown["schema"]
    assert real["verb"] == shown["verb"]
