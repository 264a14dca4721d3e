"""A paste is often many lines, starts with `-`, or is an ordinary error (issue 34).

`rgt gotcha search` and `rgt doctor` take a whole pasted block or a log file and say which line
showed each gotcha; a pasted line that starts with `-` (`-bash: ...`) is text, not an option;
an ordinary programming error gets no guess, only "not a match, but see" titles.
"""

from __future__ import annotations

import json

from cli import rgt

from rgt.profiles import search_gotchas
from rgt.profiles.paste import ordinary_error
from rgt.profiles.search import Searcher

# What a terminal shows when a job dies: routine lines, then the decisive one, then follow-ons.
PASTE = "\n".join([
    "Epoch 3/10: 100%|██████████| 1563/1563 [02:11<00:00, 11.9it/s]",
    "root@box:~/work# python train.py",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total"
    " capacity of 79.10 GiB",
    "",
    "ssh: connect to host 10.0.0.7 port 22: Connection refused",
])


def test_a_pasted_block_is_searched_line_by_line_and_says_which_line():
    hits = {h.gotcha.id: h for h in search_gotchas(PASTE)}
    assert hits["U10"].line_no == 3 and hits["U10"].line.startswith("torch.OutOfMemoryError")
    assert hits["U49"].line_no == 5 and "Connection refused" in hits["U49"].line
    assert all(not h.guess for h in hits.values()), "rules fired: no guesses for a block"


def test_a_block_of_routine_lines_gets_no_answer():
    routine = "\n".join(["wandb: Tracking run with wandb version 0.19.8",
                         "GPU available: True, used: True",
                         "salloc: Granted job allocation 13527496"])
    assert search_gotchas(routine) == []


def test_ordinary_programming_errors_get_no_guess_but_near_titles():
    for line in ["KeyError: 'lr_decay'", "ModuleNotFoundError: No module named 'training'",
                 "ERROR: No matching distribution found for main_train",
                 "RuntimeError: Expected all tensors to be on the same device, but found at "
                 "least two devices, cuda:0 and cpu!"]:
        assert ordinary_error(line), line
        assert search_gotchas(line) == [], line
    # the GPU stack, a library or the box's disk keep a line open to guesses and rules
    assert not ordinary_error("ImportError: libcuda.so.1: cannot open shared object file")
    assert not ordinary_error("ERROR: No matching distribution found for torch==2.1.0+cu121")
    assert Searcher().closest("KeyError: 'Experiment'", 3) is not None  # titles, never answers


def test_a_pasted_line_starting_with_a_dash_is_searched_not_read_as_options():
    done = rgt("gotcha", "search", "-bash: nvidia-smi: command not found", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "U31" in {h["id"] for h in json.loads(done.stdout)}
    for words in (["--> 12 | x = f()"], ["--", "--json"]):  # `--`: all of the rest is text
        marker = rgt("gotcha", "search", *words)
        assert marker.returncode == 1, marker.stdout + marker.stderr  # searched: no match
        assert "No gotcha matches" in marker.stdout and "Usage" not in marker.stdout


def test_search_and_doctor_read_a_log_file_and_name_the_lines(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(PASTE + "\n", encoding="utf-8")
    found = json.loads(rgt("gotcha", "search", "--file", str(log), "--json").stdout)
    lines = {h["id"]: h["line_no"] for h in found}
    assert lines["U10"] == 3 and lines["U49"] == 5
    table = rgt("gotcha", "search", "--file", str(log))
    assert table.returncode == 0 and "3: torch.OutOfMemoryError" in table.stdout
    doctor = json.loads(rgt("doctor", "--file", str(log), "--json").stdout)
    where = {f["id"]: f["where"] for f in doctor["findings"]}
    assert where["U10"] == "line 3" and where["U49"] == "line 5"
    stdin = rgt("gotcha", "search", "--file", "-", "--json", input=PASTE)
    assert "U10" in {h["id"] for h in json.loads(stdin.stdout)}


def test_nothing_matching_says_so_and_offers_near_titles_exit_1():
    done = rgt("gotcha", "search", "Traceback (most recent call last):\nKeyError: 9")
    assert done.returncode == 1
    assert "No gotcha matches that text." in done.stdout
    missing = rgt("gotcha", "search", "--file", "/nonexistent/train.log")
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert "Traceback" not in missing.stderr
