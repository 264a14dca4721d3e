"""What `rgt gotcha search` does to a pasted line before matching it (issue 16).

A paste carries a logger's prefix, colour codes and quotes escaped by a repr; the rules must read
the failure the same with or without them. The fuzzy stage must not guess for a line that says
nothing went wrong, nor on words that only name the user's own paths.
"""

from __future__ import annotations

import pytest

from rgt.profiles import search_gotchas
from rgt.profiles.search import FUZZY, RULE, normalise


@pytest.mark.parametrize("pasted, bare", [
    ("[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] exits with code = -9",
     "exits with code = -9"),
    ("2020-11-11 10:46:37.467224: E tensorflow/stream_executor/cuda/cuda_driver.cc:314] "
     "failed call to cuInit", "failed call to cuInit"),
    ("[rank6]:[E1206 18:44:16.997991020 ProcessGroupNCCL.cpp:1515] [PG 1 Rank 6] timed out",
     "[PG 1 Rank 6] timed out"),
    ("W 11-26 19:36:31 cloud_vm_ray_backend.py:689]   2022-11-26 19:36:18,508 WARN "
     "node_provider.py:462 -- create_instances failed", "create_instances failed"),
    ("\x1b[31mKilled\x1b[0m", "Killed"),
    ("Failed to resolve \\'huggingface.co\\'", "Failed to resolve 'huggingface.co'"),
    ("a   b\t c", "a b c"),
    # typography from a chat or forum: curly quotes, full-width punctuation, a non-breaking space
    ("NVIDIA-SMI has failed because it couldn\u2018t communicate", "NVIDIA-SMI has failed because "
     "it couldn't communicate"),
    ("train.sh: 第 5 行\uff1a 12345 已杀死", "train.sh: 第 5 行: 12345 已杀死"),
    ("Error:\u00a0CUDA out of memory", "Error: CUDA out of memory"),
    # markdown around the line, a quote marker, a shell prompt
    ("**rsync: connection unexpectedly closed (0 bytes received so far) [sender]**",
     "rsync: connection unexpectedly closed (0 bytes received so far) [sender]"),
    ("> `RuntimeError: received 0 items of ancdata`", "RuntimeError: received 0 items of ancdata"),
    ("root@box:~# nvidia-smi", "nvidia-smi"),
    # syslog's host and tag, the kernel's clock, compose's service column, kubectl's prefix
    ("Nov 20 10:00:00 node1 kernel: [ 1234.567] Out of memory: Killed process 1 (python)",
     "Out of memory: Killed process 1 (python)"),
    ("trainer-1  | ImportError: libGL.so.1: cannot open shared object file",
     "ImportError: libGL.so.1: cannot open shared object file"),
    ("[pod/train-0/trainer] Killed", "Killed"),
])
def test_normalise_drops_what_the_paste_added(pasted, bare):
    assert normalise(pasted) == bare


def test_a_programs_own_asterisks_are_not_markdown():
    # Slurm frames its cancel line in `***`; emphasis is `**`. Read with its doubled blank
    # collapsed, the line must keep them, as SLURM2's rules need them.
    line = ("slurmstepd: error: *** STEP 4242.0 ON node01 CANCELLED AT 2026-01-01T00:00:00  DUE TO "
            "PREEMPTION ***")
    assert normalise(line) == " ".join(line.split())
    assert [h.gotcha.id for h in search_gotchas(line, limit=3)][:1] == ["SLURM2"]


@pytest.mark.parametrize("line, gotcha", [
    ("2020-11-11 10:46:37: lost connection", "GEN3"),  # `^lost connection$` once the stamp goes
    ("\x1b[31mKilled\x1b[0m", "U9"),  # a coloured terminal's bare `Killed`
    ("`lost connection`", "GEN3"),  # a code span around an anchored line
    ("Nov 20 10:00:00 node1 train.sh[881]: Killed", "U9"),  # syslog's host and tag
])
def test_anchored_rules_fire_through_a_log_prefix_or_colour(line, gotcha):
    hits = search_gotchas(line, limit=3)
    assert hits and hits[0].why == RULE and hits[0].gotcha.id == gotcha, hits


def test_no_guess_for_a_line_that_says_nothing_is_wrong():
    # shares 'api', 'key', 'wandb', 'configured' with U35, and was a false answer before
    assert search_gotchas("wandb: W&B API key is configured. Use wandb login --relogin") == []
    # no rule names this wording ("api key missing" is one since U35 learnt the class), so the
    # fuzzy stage answers
    guess = search_gotchas("wandb cannot find an api key inside the job")
    assert guess and guess[0].why == FUZZY and guess[0].gotcha.id == "U35"
    assert search_gotchas("wandb api key missing inside the job")[0].why == RULE


def test_paths_are_not_words():
    # the same words guess U35 as prose; as the user's own path they say nothing
    assert [h.gotcha.id for h in search_gotchas("error reading wandb offline api key wrappers")
            ][:1] == ["U35"]
    assert search_gotchas("error reading /wandb/offline/api/key/wrappers") == []


def test_a_count_of_zero_is_not_trouble():
    # 'evicted', 'failed' and 'errors' would make these lines eligible for a guess
    assert search_gotchas("Evicted 0 pods from node gpu-node-1") == []
    assert search_gotchas("rsync: sent 1,234 bytes in 2 files, 0 errors") == []
    assert search_gotchas("Evicted 3 pods: node was low on disk")[0].gotcha.id == "K8S5"
    # sshd's own log is the server's view: a client leaving, not U59's refused connection
    assert search_gotchas("Nov 20 10:00:00 box sshd[12]: Connection closed by 203.0.113.9 port "
                          "52144") == []
