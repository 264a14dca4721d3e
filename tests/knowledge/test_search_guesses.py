"""The guesses `rgt gotcha search` adds where the rules name fewer than three gotchas.

A failure's next wording (another tool, version or translation) misses rules written from the
last one. Search then offers, after any rule hit and marked as guesses, the gotchas one of whose
known lines (`detect.examples`) looks like the pasted one, and, only when no rule fired,
those whose words it shares. These tests pin what each stage may and may not do; the corpora
(test_heldout_corpus.py) measure how well they do.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from cli import rgt

from rgt.profiles import search_gotchas
from rgt.profiles.files import DATA_DIR
from rgt.profiles.search import FUZZY, LIKE, RULE
from rgt.profiles.similar import words_of


def _why(line: str, profile: str | None = None) -> list[tuple[str, str]]:
    return [(h.gotcha.id, h.why) for h in search_gotchas(line, profile)]


def test_a_new_wording_of_a_known_line_is_answered_by_likeness():
    # U57's known line says "driver not loaded"; the same container error about the library
    # matches none of U57's rules
    line = "nvidia-container-cli: initialization error: nvml error: library not loaded: unknown"
    hits = search_gotchas(line)
    assert hits[0].gotcha.id == "U57" and hits[0].why == LIKE
    assert hits[0].match.startswith("nvidia-container-cli: initialization error: nvml error")
    assert all(h.why != RULE for h in hits)


def test_guesses_come_after_every_rule_hit_and_stop_at_three():
    line = "sbatch: error: Batch job submission failed: Invalid feature specification"
    hits = search_gotchas(line)
    whys = [h.why for h in hits]
    assert whys[0] == RULE and LIKE in whys and len(hits) <= 3
    assert whys == sorted(whys, key=lambda why: why != RULE)  # rules first, then guesses
    assert len({h.gotcha.id for h in hits}) == len(hits)  # a gotcha once


def test_three_rule_hits_leave_no_room_for_guesses():
    hits = search_gotchas("OSError: [Errno 28] No space left on device")
    assert len(hits) >= 3 and all(h.why == RULE for h in hits)


def test_shared_words_answer_only_when_no_rule_fires():
    # no rule and no known line come close; the words (CamelCase split) say Slurm's cgroup kill
    line = "job 4242 exceeded its memory limit and was killed by the cgroup oom handler"
    hits = search_gotchas(line)
    assert hits and all(h.why == FUZZY for h in hits)
    assert hits[0].gotcha.id in {"SLURM4", "U9"}
    # a rule hit: words add nothing, only likeness may fill
    assert FUZZY not in {why for _, why in _why("kex_exchange_identification: read: Connection "
                                                "timed out")}


def test_shared_words_are_shown_as_the_line_spells_them():
    hit = search_gotchas("job 4242 exceeded its memory limit and was killed by the cgroup oom "
                         "handler")[0]
    assert "killed" in hit.match.split() and "exceeded" in hit.match.split()


@pytest.mark.parametrize("line", [
    "node1:2211:2211 [0] NCCL INFO NET/IB : No device found.",  # informational level
    "[W ProcessGroupNCCL.cpp:1856] Warning: TORCH_NCCL_ASYNC_ERROR_HANDLING is deprecated in "
    "favor of TORCH_NCCL_ASYNC_ERROR_HANDLING",  # a notice about the program's own interface
    "Kill process group on exit: enabled",  # a setting echoed at start
    "MemoryPressure   False   KubeletHasSufficientMemory   kubelet has sufficient memory",
    "RuntimeError: Error(s) in loading state_dict for Net:",  # the exception class is no word
])
def test_no_guess_for_a_line_that_reports_no_failure(line):
    assert search_gotchas(line) == []


def test_naming_the_platform_keeps_guesses_to_it_and_the_universal_ones():
    line = "Error: the pod's container disk is full, write failed"
    anywhere = {h.platform for h in search_gotchas(line)}
    assert anywhere - {"universal", "kubernetes"}  # RunPod's container disk, say
    assert {h.platform for h in search_gotchas(line, "kubernetes")} <= {"universal",
                                                                        "kubernetes"}


def test_words_of_splits_camel_case_and_drops_endings_and_generic_classes():
    assert set(words_of("QOSMinCpuNotSatisfied")) >= {"qos", "min", "cpu", "satisfi"}
    assert list(words_of("RuntimeError ValueError")) == []
    assert "kill" in words_of("killed") and "process" not in words_of("processes")


def test_a_profile_of_the_users_own_is_searched_by_its_known_lines(tmp_path, monkeypatch):
    # the user's own `local` profile (RGT_PROFILE_PATH shadows the bundled one) with a gotcha
    bundled = (DATA_DIR / "local.yaml").read_text(encoding="utf-8")
    assert "\ngotchas: []\n" in bundled
    (tmp_path / "local.yaml").write_text(bundled.replace("\ngotchas: []\n", textwrap.dedent("""
        gotchas:
          - id: LOC1
            title: The lab's scratch quota daemon kills the job
            symptom: quotad logs the kill.
            cause: Scratch over quota.
            fix: Clean scratch.
            detect:
              patterns: ['quotad: killing job \\d+ for scratch over quota']
              examples: ['quotad: killing job 4242 for scratch over quota (used 5.1T of 5T)']
        """)), encoding="utf-8")
    line = "quotad: job 4242 will be killed, scratch over quota (used 5.3T of 5T)"
    assert "LOC1" not in [g for g, _ in _why(line)]
    monkeypatch.setenv("RGT_PROFILE_PATH", str(tmp_path))
    assert ("LOC1", LIKE) in _why(line)


def test_the_cli_marks_guesses():
    line = "nvidia-container-cli: initialization error: nvml error: library not loaded: unknown"
    human = rgt("gotcha", "search", line)
    assert human.returncode == 0 and "(guesses)" in human.stdout
    assert "guess, like a known line" in " ".join(human.stdout.split())
    found = json.loads(rgt("gotcha", "search", line, "--json").stdout)
    assert found[0]["id"] == "U57" and found[0]["why"] == LIKE
