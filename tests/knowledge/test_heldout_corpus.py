"""`rgt gotcha search` on error lines the rules were not written from (heldout_corpus.yaml).

error_corpus.yaml measures the rules on the lines they were tuned on (80/80), a ceiling. This
file measures them on lines collected afterwards from other threads, answers chosen before
searching:

- round 1 (44 lines with a catalog answer, 26 unrelated): with the rules as tuned on
  error_corpus, 13/44 had a right gotcha in the top 3 (29.5%) and 4/26 unrelated lines got an
  answer. Its misses drove class-level rule changes (commit 7cc579c): 42/44 and 0/26, a figure
  that is no longer held out.
- round 2 (19 + 12), collected after those changes: 7/19 (36.8%) and 1/12 unrelated lines
  answered. Its misses, with round 1's gaps, drove the next change (commit 2bb2254: a
  normalised line, patterns keyed on each failure class, new gotchas U53-U59, SLURM7, NB6-NB8,
  no fuzzy guess for a line that says nothing went wrong): 18/19 and 0/12, now fitted too
  (round 1 went to 44/44).
- round 3 (56 + 22), collected after that change from threads no corpus or catalog source
  cites and used for nothing else: 45/56 (80.4%; 30/39 on lines whose answer is an older
  gotcha, 15/17 on the new ones, which the collection over-represents) and 0/22 unrelated lines
  answered. That was the honest figure for lines nobody had seen, below the issue's 90%. Its
  misses then drove the next change (rules keyed on whole failure classes in more wordings and
  locales: OOM-killed and exit code (137) variants, WorkNCCL timeouts, NCCL connect failures,
  any device driver name, invalid or missing API keys, every line of ssh's host-key warning,
  CRLF scripts in any locale, Colab's session crash; new gotchas U60-U63): 56/56 and 0/22,
  so round 3 is now fitted too, no longer held out. A fresh round is needed to measure that
  change.
- round 4 (73 + 29; 4 more lines the catalog lacks), collected after that change by someone who
  never ran search on them, from 70 repositories no corpus or catalog source cites, answers
  chosen from the catalog first: 60/73 (82.2%) in the top 3 with or without --profile, and
  0/29 unrelated lines answered. That was the honest figure for unseen lines, still below 90%.
  Its misses then drove the next change (each class in the wordings it takes in the wild: any
  sbatch/srun refusal, any FailedScheduling reason, every image-pull state, any eviction,
  Colab's usage limits in the interface's languages, NVML and driver failures in any case and
  punctuation, every rsync/scp/sftp transport failure, every way the Hub is unreachable, ssh
  keys gcloud or PuTTY refuse; a paste's curly quotes, full-width punctuation, markdown and
  syslog prefixes normalised; new gotchas U64-U66 for three of its `lacks:` lines): 73/73 and
  0/29, so round 4 is now fitted too, no longer held out. A fresh round is needed to measure
  that change.
- round 5 (80 + 39; 8 more the catalog lacks), collected after that change by someone who never
  ran search on them, from 105 repositories nothing here cites: 66/80 (82.5%) in the top 3 with
  or without --profile, and 1/39 unrelated lines answered (a CPU-only run's warning that no
  NVIDIA driver was found, answered U31). Its misses drove the next change (SIGHUP from a
  session that ended: torch's SignalException signal 1, closing signal SIGHUP, 'hangup'; a
  continuation flag run as a command from CRLF; nvidia-smi losing a device handle; NVRM probe
  failures; a bare quota refusal; any scheduler's "no nodes with enough resources"; urllib3 read
  timeouts and git's RPC failures): 78/80, so round 5 is fitted too.
- round 6 (82 + 37; 4 more the catalog lacks), collected after that change the same way, from
  about 80 repositories: 62/82 (75.6%) in the top 3, 63/82 with --profile, 0/37 unrelated lines
  answered. 9 of its 20 misses are a user's own sentences or issue titles rather than program
  output ("There is no error message or anything ..."), which only the fuzzy stage could answer.
  Its program-output misses drove the next change (NCCL's posix_fallocate on a full /dev/shm,
  torch.save's "File ... cannot be opened" and write() EIO, a cut "CUDA driver version is
  insufficient", the Hub URL with a slash, W&B's GraphQL 401, Azure/Vertex quota wordings, QOS
  minimums and job_submit plugins, a localised packet_write_wait): 73/82, fitted; the 9 left
  are the sentences.
- round 7 (82 + 38; 9 more the catalog lacks), collected after that change the same way but of
  program output only (no sentences or titles, as the issue defines the corpus), from 92
  repositories: 71/82 (86.6%) in the top 3, with or without --profile, 0/38 unrelated lines
  answered.
  Its misses drove the next change (any srun task range out of memory, the kernel's "Kill
  process", an uncorrectable ECC error, a full df row, a gated repo's request-access line,
  dash's CRLF syntax error, RunPod's basic ssh refusing a PTY, gcloud's ssh exit 255, torch's
  shared-memory object out of descriptors): 80/82, fitted (two nvidia-smi table rows left).
- round 8 (67 + 32; 2 more the catalog lacks), program output collected after that change the
  same way, from 83 repositories: 57/67 (85.1%) in the top 3, with or without --profile, 0/32
  unrelated lines answered. Three of its ten misses are one message (multiprocessing's
  "bootstrapping phase", U44).
  Its misses drove the next change (multiprocessing's bootstrapping error for U44, nvidia
  zombie processes for U11, which had no detect patterns; THCudaCheck out of memory, a bare
  "nvidia-smi not found", NCCL INFO connect retries, Colab's "no runtime available"): 65/67,
  fitted.
- round 9 (24 + 32; 6 more the catalog lacks), program output collected after that change the
  same way; small, because the earlier rounds had used up most threads the search finds: 18/24
  (75%) in the top 3, 0/32 unrelated lines answered. Its misses then drove the last change
  (403 Forbidden from the Hub or its mirror, Ray's memory-pressure kills, srun's "task 0:
  Killed"): 22/24, fitted.

Fresh rounds of program output (7-9) together: 146/173 (84.4%); every held-out round at the time
it was first measured (4-9): 334/408 (81.9%). Below the issue's 90%.

Then search learnt to guess where the rules name fewer than three gotchas (profiles/similar.py:
gotchas whose known lines look like the pasted one, then shared words). Run with the catalog and
rules each of rounds 4-9 was first measured with, the guesses take those rounds from 334/408 to
356/408 (87.3%); that is a design figure, the misses were in view while the guesses were built.

- round 10 (83 + 40; 10 more the catalog lacks), program output collected after that change by
  two collectors who never ran search and saw neither the rules nor an earlier corpus, from 133
  threads nothing here cited (20 of them forum, documentation and blog pages). 11 more lines
  they collected were, verbatim, lines of error_corpus.yaml (the commonest messages: "No space
  left on device", "Permission denied (publickey).", ...) and were dropped, as every round's
  are. With the guesses (commit dc3ee50): 74/83 (89.2%) in the top 3, with or without
  --profile, 0/40 unrelated lines answered; the code before them (commit 46666dd): 72/83
  (86.7%), 0/40. With the 11 common lines kept, 85/94 (90.4%) and 83/94 (88.3%).
  Its misses then drove the next change (a driver upgraded without a reboot, "NVRM: API
  mismatch" and "Driver/library version mismatch", for U57; any "NVRM: Xid" line for U22; apt's
  "Temporary failure resolving"; new gotchas U67 for CUDA extensions built for another torch or
  CUDA and SLURM8 for ReqNodeNotAvail, three and one of its `lacks:` lines; "version" and
  "information" no longer count as shared words): 78/83, fitted.
- round 11 (97 + 44; 13 more the catalog lacks), program output collected after that change
  the same way, from 154 threads: 89/97 (91.8%) in the top 3, with or without --profile, and 1/44
  unrelated lines answered (JAX's "Unable to initialize backend 'tpu'" on a machine without one,
  guessed). 25 of the 97 are verbatim lines of earlier rounds (the commonest messages); on the
  72 lines no corpus here held, 64 (88.9%). The code before the guesses (46666dd): 87/97
  (89.7%), 63/72 (87.5%), 0/44.
  Its misses then drove the next change (a TPU held by another process for U11, GCP's "Quota
  failure for project", sbatch's "DOS line breaks", a pod that "does not have a host
  assigned"): 93/97, fitted. NCCL's INFO-level "Call to connect returned Connection refused,
  retrying" stays unanswered: test_search_harmless.py holds it routine (a retry while the
  peers start), though in its thread the retries never ended.

- round 12 (89 + 39; 10 more the catalog lacks), program output collected after that change
  the same way, with the catalog as it then stood (U67, SLURM8, K8S7, NB9 among the answers),
  from 138 threads: 86/89 (96.6%) in the top 3, with or without --profile, 0/39 unrelated lines
  answered; on the 74 lines no corpus here held, 71 (95.9%). The rules alone score 84/89, the
  guesses add two. The code before this session (46666dd) scores the same lines 73/89 (82.0%)
  and 59/74 (79.7%): it lacks the gotchas rounds 10 and 11 added as much as the guesses.
  Its misses then drove the next change (XLA's "RESOURCE_EXHAUSTED: Attempting to reserve" for
  U10, a bare ReqNodeNotAvail for SLURM8, a registry's "unauthorized" on an image manifest for
  K8S3): 89/89, fitted. The shared-words stage then stopped reading the examples' words (left to
  the likeness stage: a whole line's incidental words, such as docker's HTTP verb "Head", made
  "No head node exists" a guess for K8S3); round 11 lost one fitted line to that (urllib3's
  "socket.timeout: The read operation timed out", 92/97).

- round 13 (99 + 44; 10 more the catalog lacks), program output collected after that change the
  same way, from 153 threads: 91/99 (91.9%) in the top 3, with or without --profile, 0/44
  unrelated lines answered; on the 79 lines no corpus here held, 71 (89.9%). The rules alone
  score 84/99: the guesses add seven. The code before this session (46666dd): 76/99 (76.8%),
  59/79 (74.7%).
  Its misses then drove the next change (XLA's other device-memory wordings for U10, a missing
  torch C++ symbol for U67, Go's and Node's refused and timed-out connections to port 22 for
  U49 and U66, the docker daemon's "unauthorized" for K8S3, torch elastic's "Received 1 death
  signal" for GEN2; and, for `lacks:` lines of rounds 11-13, new gotchas SLURM9 for a job ended
  at its time limit, SLURM10 for a controller that does not answer, U68 for a torch pin with no
  wheel for this Python, machine or CUDA suffix, U69 for scp against a box without
  sftp-server): 98/99, fitted.

Fresh rounds 10-13 together, each measured with the code of its time: 340/368 (92.4%) in the
top 3; on the 297 lines no earlier corpus held, 271 (91.2%); 1/167 unrelated lines answered.

The bars below are the measured figures, so a change that loses a hit or adds a false answer
fails here. Lines marked `lacks:` are failures no gotcha explains; they are listed with what
search answers, not scored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rgt.profiles import search_gotchas
from rgt.profiles.loader import all_gotchas

HERE = Path(__file__).parent
HELDOUT = yaml.safe_load((HERE / "heldout_corpus.yaml").read_text(encoding="utf-8"))
TUNING = yaml.safe_load((HERE / "error_corpus.yaml").read_text(encoding="utf-8"))
KNOWN_IDS = {g.id for _, g in all_gotchas()}

ROUNDS = {  # round: (positive key, negative key)
    1: ("positive", "negative"),
    2: ("round2_positive", "round2_negative"),
    3: ("round3_positive", "round3_negative"),
    4: ("round4_positive", "round4_negative"),
    5: ("round5_positive", "round5_negative"),
    6: ("round6_positive", "round6_negative"),
    7: ("round7_positive", "round7_negative"),
    8: ("round8_positive", "round8_negative"),
    9: ("round9_positive", "round9_negative"),
    10: ("round10_positive", "round10_negative"),
    11: ("round11_positive", "round11_negative"),
    12: ("round12_positive", "round12_negative"),
    13: ("round13_positive", "round13_negative"),
}
# Measured when each bar was set (see the module docstring). Round 1's one false answer came with
# the guesses from known lines: rsync's "name lookup failed for <ip>: Name or service not known"
# (a harmless reverse lookup) resembles the DNS failure U50 explains.
MIN_RATE = {1: 44 / 44, 2: 18 / 19, 3: 56 / 56, 4: 73 / 73, 5: 78 / 80, 6: 73 / 82,
            7: 80 / 82, 8: 65 / 67, 9: 22 / 24,
            10: 78 / 83, 11: 92 / 97,
            12: 89 / 89, 13: 98 / 99}
MAX_FALSE_ANSWERS = {1: 1, 2: 0, 3: 0, 4: 0, 5: 1, 6: 0, 7: 0, 8: 0, 9: 0, 10: 0, 11: 1,
                     12: 0, 13: 0}
# The gotchas added by commit 2bb2254, for round 3's split between old and new answers.
NEW_GOTCHAS = {"U53", "U54", "U55", "U56", "U57", "U58", "U59", "SLURM7", "NB6", "NB7", "NB8"}


def _answerable(round_: int) -> list[dict]:
    return [e for e in HELDOUT[ROUNDS[round_][0]] if "expect" in e]


def _lacking(round_: int) -> list[dict]:
    return [e for e in HELDOUT[ROUNDS[round_][0]] if "lacks" in e]


def _top3(line: str, profile: str | None = None) -> list[str]:
    return [hit.gotcha.id for hit in search_gotchas(line, profile, limit=3)]


def _misses(entries: list[dict], *, with_profile: bool = False) -> list[tuple]:
    missed = []
    for entry in entries:
        profile = entry.get("profile") if with_profile else None
        top = _top3(entry["line"], profile)
        if not set(top) & set(entry["expect"]):
            missed.append((entry["line"][:70], entry["expect"], top))
    return missed


def test_the_corpus_is_sourced_sized_and_disjoint_from_the_tuning_corpus():
    for round_ in set(ROUNDS) - {2, 9}:  # the rounds sized to measure a rate, not to probe misses
        assert len(_answerable(round_)) >= 40 and len(HELDOUT[ROUNDS[round_][1]]) >= 20
    tuning_lines = {e["line"] for e in TUNING["positive"] + TUNING["negative"]}
    tuning_threads = {e["source"] for e in TUNING["positive"] + TUNING["negative"]}
    for positive, negative in ROUNDS.values():
        for entry in HELDOUT[positive] + HELDOUT[negative]:
            assert entry["line"].strip() and entry["source"].startswith("https://"), entry
            assert entry["line"] not in tuning_lines, entry
            assert entry["source"] not in tuning_threads, entry
        for entry in HELDOUT[positive]:
            # either the right gotchas, or a statement of what the catalog lacks; never both
            assert ("expect" in entry) != ("lacks" in entry), entry
            assert set(entry.get("expect", [])) <= KNOWN_IDS, entry
            assert entry.get("profile") in (None, *{p for p, _ in all_gotchas()}), entry


@pytest.mark.parametrize("round_", sorted(ROUNDS))
def test_a_right_gotcha_is_in_the_top_3_at_the_measured_rate(round_):
    entries = _answerable(round_)
    missed = _misses(entries)
    hits = len(entries) - len(missed)
    rate = hits / len(entries)
    new = [e for e in entries if set(e["expect"]) & NEW_GOTCHAS]
    new_hits = len(new) - len(_misses(new))
    print(f"held-out round {round_}: {hits}/{len(entries)} in the top 3 ({rate:.1%}); "
          f"old gotchas {hits - new_hits}/{len(entries) - len(new)}, "
          f"new gotchas {new_hits}/{len(new)}; missed {missed}")
    assert rate >= MIN_RATE[round_] - 1e-9, missed


@pytest.mark.parametrize("round_", sorted(ROUNDS))
def test_naming_the_platform_does_not_lose_answers(round_):
    entries = _answerable(round_)
    plain = len(entries) - len(_misses(entries))
    missed = _misses(entries, with_profile=True)
    print(f"held-out round {round_} with --profile where known: "
          f"{len(entries) - len(missed)}/{len(entries)}; missed {missed}")
    assert len(entries) - len(missed) >= plain, missed


@pytest.mark.parametrize("round_", sorted(ROUNDS))
def test_unrelated_lines_get_at_most_the_measured_false_answers(round_):
    negatives = HELDOUT[ROUNDS[round_][1]]
    answered = [(e["line"][:60], [(h.gotcha.id, h.why, h.match) for h in hits[:3]])
                for e in negatives if (hits := search_gotchas(e["line"]))]
    print(f"held-out round {round_}: {len(answered)}/{len(negatives)} unrelated lines "
          f"answered: {answered}")
    assert len(answered) <= MAX_FALSE_ANSWERS[round_], answered


def test_lines_the_catalog_lacks_are_listed_with_what_search_answers():
    lacking = [e for r in ROUNDS for e in _lacking(r)]
    assert len(lacking) >= 10
    for entry in lacking:
        answer = [(h.gotcha.id, h.why) for h in search_gotchas(entry["line"], limit=3)]
        print(f"catalog lacks: {entry['lacks']} <- {entry['line'][:50]!r} answered {answer}")
        assert entry["lacks"].strip()
