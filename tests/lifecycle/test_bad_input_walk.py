"""Every verb with a bad box name, run id, path or spec: one clear line on stderr, exit 2, no
traceback (issue 13, "Bad input")."""

from __future__ import annotations

import pytest
from boxkit import write_job

BAD = [
    ("audit", "nobox"), ("run", "nobox", "{spec}"), ("watch", "nobox"), ("logs", "nobox"),
    ("pull", "nobox"), ("down", "nobox", "--yes"), ("cancel", "nobox", "--yes"),
    ("resume", "nobox"), ("runs", "nobox"), ("cloud-status", "nobox"),
    ("watch", "box", "no-such-run"), ("logs", "box", "no-such-run"),
    ("pull", "box", "no-such-run"), ("cancel", "box", "no-such-run", "--yes"),
    ("resume", "box", "no-such-run"),
    ("run", "box", "{tmp}/missing.yaml"), ("smoke", "{tmp}/missing.yaml"),
    ("run", "box", "{badspec}"), ("smoke", "{badspec}"), ("run", "box", "{notyaml}"),
    ("audit", "box", "--job", "{tmp}/missing.yaml"),
    ("up", "x", "--profile", "nosuchprofile"), ("up", "../x"),
    ("profile", "show", "nosuchprofile"), ("compare", "autodl", "nosuchprofile"),
    ("ckpt", "verify", "{tmp}/missing.pt"), ("ckpt", "ls", "{tmp}/missing-dir"),
]


@pytest.fixture
def box_with_a_run(cli, tmp_path):
    cli.ok("up", "box")
    spec = write_job(tmp_path / "good", run="echo ok")
    cli.ok("watch", "box", cli.ok("run", "box", str(spec)).stdout.split()[-1], "--until-done")
    (tmp_path / "bad.yaml").write_text("name: j\nworkdir: .\nrun: 'true'\noutptus: [out]\n")
    (tmp_path / "notyaml.yaml").write_text("name: j\nrun: [unclosed\n")
    return {"spec": str(spec), "tmp": str(tmp_path), "badspec": str(tmp_path / "bad.yaml"),
            "notyaml": str(tmp_path / "notyaml.yaml")}


def test_every_verb_says_one_line_and_exits_2(cli, box_with_a_run):
    wrong = []
    for args in BAD:
        args = [a.format(**box_with_a_run) for a in args]
        result = cli(*args)
        lines = result.stderr.strip().splitlines()
        if result.returncode != 2 or len(lines) != 1 or "Traceback" in result.stderr:
            wrong.append(f"rgt {' '.join(args)} -> {result.returncode}: {result.stderr[-300:]}")
    assert not wrong, "\n".join(wrong)
