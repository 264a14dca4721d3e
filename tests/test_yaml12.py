"""Job specs are read with YAML 1.2 booleans and integers (rgt.yaml12, issue 29 item 4).

PyYAML's YAML 1.1 made the README's own `recover: {on: [crashed, preempted]}` a key True
("field `recover.1` Keys should be strings"), exported `FLAG: yes` as "True", and read a
walltime `1:30` as the integer 90. These go through rgt's loader (load_spec) from a file.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from rgt import yaml12
from rgt.spec import load_spec


def spec_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text("name: j\nworkdir: .\nrun: python train.py\n" + body)
    return path


def test_the_readmes_recover_line_loads(tmp_path):
    line = "recover: {max_restarts: 3, on: [crashed, preempted], backoff_s: 10}\n"
    assert True in yaml.safe_load(line)["recover"]  # the 1.1 trap this replaces
    spec = load_spec(spec_file(tmp_path, line))
    assert spec.recover.on == ["crashed", "preempted"] and spec.recover.max_restarts == 3


def test_env_words_are_exported_as_a_shell_reads_them(tmp_path):
    spec = load_spec(spec_file(tmp_path, "env: {A: yes, B: no, C: on, D: off, E: y, "
                                         "F: true, G: null}\n"))
    assert spec.env == {"A": "yes", "B": "no", "C": "on", "D": "off", "E": "y",
                        "F": "true", "G": ""}  # not Python's "True" and "None"


def test_a_walltime_with_a_colon_stays_what_was_written(tmp_path):
    assert yaml.safe_load("t: 1:30")["t"] == 90  # 1.1: sexagesimal
    spec = load_spec(spec_file(tmp_path, "resources: {time: 1:30}\n"))
    assert spec.resources.time == "1:30"


def test_numbers_and_booleans_of_the_core_schema_still_are():
    assert yaml12.load("{a: 12, b: -3, c: 0x1f, d: 0o17, e: 1.5, f: .inf, g: true, "
                       "h: False, i: null, j: ~, k: 1e3}") == {
        "a": 12, "b": -3, "c": 31, "d": 15, "e": 1.5, "f": float("inf"), "g": True,
        "h": False, "i": None, "j": None, "k": 1000.0}
