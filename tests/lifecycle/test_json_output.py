"""`--json` on every verb that reports state: one object {"schema": 1, "verb": ..., <noun>}
on stdout (README: JSON output), exit codes as without it."""

from __future__ import annotations

import json

from boxkit import write_job


def _doc(result, verb: str) -> dict:
    data = json.loads(result.stdout)
    assert data["schema"] == 1 and data["verb"] == verb, data
    return data


def test_lifecycle_verbs_speak_json(cli, tmp_path):
    cli.ok("up", "box")
    boxes = _doc(cli.ok("ls", "--json"), "ls")["boxes"]
    assert [(b["name"], b["state"], b["live_runs"]) for b in boxes] == [("box", "up", 0)]
    audit = cli("audit", "box", "--json")
    assert audit.returncode in (0, 1) and "verdicts" in _doc(audit, "audit")["audit"]

    spec = write_job(tmp_path / "job", run="mkdir -p out && echo 1 > out/a", outputs=["out"])
    run_id = cli.ok("run", "box", str(spec)).stdout.split()[-1]
    watched = _doc(cli.ok("watch", "box", run_id, "--until-done", "--json"), "watch")
    assert watched["run"]["id"] == run_id and watched["run"]["status"] == "succeeded"
    assert cli("watch", "box", "--follow", "--json").returncode == 2

    refused = cli("down", "box", "--yes", "--json")
    assert refused.returncode == 3
    doc = _doc(refused, "down")
    assert doc["refused"] is True and run_id in " ".join(doc["unverified"])

    pulled = cli("pull", "box", run_id, "--dest", str(tmp_path / "p"), "--json")
    assert pulled.returncode == 0, pulled.stderr
    assert _doc(pulled, "pull")["pull"]["ok"] is True
    assert _doc(cli.ok("runs", "--json"), "runs")["runs"][0]["pulled"] == "verified"


def test_platform_data_speaks_json(cli):
    profiles = _doc(cli.ok("profiles", "--json"), "profiles")["profiles"]
    assert "local" in [p["name"] for p in profiles]
    compared = _doc(cli.ok("compare", "autodl", "vastai", "--json"), "compare")["profiles"]
    assert set(compared) == {"autodl", "vastai"}
