"""Run words (rgt.runids) on their own, and `rgt ssh` on boxes rgt does not reach over SSH
(a Kubernetes namespace, a notebook), registered in a real store without any cluster."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from cli import rgt

from rgt import runids
from rgt.errors import UserError
from rgt.store import Box, Store


@dataclass
class _Run:
    id: str


RUNS = [_Run("train-20260101-120000-ab12"), _Run("train-20260101-130000-7d92"),
        _Run("eval-20260101-140000-ab99")]


@pytest.mark.parametrize("word, expected", [
    ("7d92", "train-20260101-130000-7d92"),  # the end of one id
    ("eval", "eval-20260101-140000-ab99"),  # the start of one id
    ("train-20260101-12", "train-20260101-120000-ab12"),
    ("@last", "eval-20260101-140000-ab99"),
    ("@-0", "eval-20260101-140000-ab99"),
    ("@-2", "train-20260101-120000-ab12"),
    ("train-20260101-130000-7d92", "train-20260101-130000-7d92"),
])
def test_a_word_names_one_run(word, expected):
    assert runids.pick(RUNS, word, "b").id == expected


@pytest.mark.parametrize("word, said", [
    ("train", "is ambiguous on box 'b': it could be train-20260101-120000-ab12, "
              "train-20260101-130000-7d92;"),
    ("2", "it could be train-20260101-120000-ab12, train-20260101-130000-7d92"),  # two ends
    ("zzz", "not found on box 'b'"),
    ("@-3", "has 3 runs, so @-2 is the oldest"),
    ("@first", "say @last for the newest run"),
])
def test_a_word_that_names_none_or_several_is_refused_in_one_line(word, said):
    with pytest.raises(UserError) as refused:
        runids.pick(RUNS, word, "b")
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert refused.value.exit_code == 2


def test_a_start_and_an_end_of_different_runs_are_ambiguous_too():
    runs = [_Run("ab12-20260101-120000-0000"), _Run("x-20260101-120000-ab12")]
    with pytest.raises(UserError, match="ambiguous"):
        runids.pick(runs, "ab12", "b")


def test_many_candidates_are_named_up_to_a_few():
    runs = [_Run(f"job-20260101-1200{n:02d}-aa{n:02d}") for n in range(20)]
    with pytest.raises(UserError) as refused:
        runids.pick(runs, "job-", "b")
    assert "and 14 older" in str(refused.value) and runs[-1].id in str(refused.value)


def test_ssh_refuses_boxes_not_reached_over_ssh_with_what_to_run(tmp_path):
    store = Store(tmp_path / "state.db")
    now = time.time()
    store.add_box(Box("k", "kubernetes", {"context": "kind-gpu", "namespace": "ml"},
                      "/checkpoints", "/checkpoints", None, "up", now))
    store.add_box(Box("nb", "colab", {"drive": str(tmp_path / "drive")}, "/content",
                      "/content/drive", None, "up", now))
    store.db.close()
    home = {"RGT_HOME": str(tmp_path)}
    kube = rgt("ssh", "k", env=home)
    assert kube.returncode == 2 and "Traceback" not in kube.stderr
    said = " ".join(kube.stderr.split())
    assert "kubectl --context kind-gpu --namespace ml exec -it POD -- bash" in said
    assert "port-forward" in said
    notebook = rgt("ssh", "nb", "--", "ls", env=home)
    assert notebook.returncode == 2 and "is not reached over SSH" in notebook.stderr
