"""Teardown words match the meter (issue 29 item 3): where rgt cannot stop a box's meter, `down
--yes` says so and leaves it up, waiting for the user's console step; only the user's typed word
makes it down; `rgt ls` tells stopped by rgt, stopped by your word and still up apart; what still
bills after can be dismissed once dealt with, and the dismissal is recorded."""

from __future__ import annotations

import json

from boxkit import up_ssh


def boxes(cli) -> dict[str, dict]:
    return {b["name"]: b for b in json.loads(cli.ok("ls", "--all", "--json").stdout)["boxes"]}


def test_only_your_word_takes_a_console_box_down(cli, sshd_server, tmp_path):
    assert up_ssh(cli, sshd_server, tmp_path).returncode == 0
    cli.ok("up", "here")

    waiting = cli("down", "gpu", "--yes")
    assert waiting.returncode == 4, waiting.stdout + waiting.stderr
    assert "gpu is not down" in waiting.stdout and "✓" not in waiting.stdout
    assert boxes(cli)["gpu"]["state"] == "up" and boxes(cli)["gpu"]["waiting_for_you"]
    listing = cli.ok("ls").stdout
    assert "up, waiting for you" in listing and "stop it in the console" in listing

    mistyped = cli("down", "gpu", input="gpx\n")
    assert mistyped.returncode == 1 and boxes(cli)["gpu"]["state"] == "up"
    down = cli.ok("down", "gpu", input="gpu\n")
    assert "✓ gpu is down by your word" in down.stdout, down.stdout
    cli.ok("down", "here", "--yes")  # this machine: rgt itself removes what it made

    after = boxes(cli)
    assert (after["gpu"]["state"], after["gpu"]["stopped_by"]) == ("down", "your word")
    assert (after["here"]["state"], after["here"]["stopped_by"]) == ("down", "rgt")
    assert after["gpu"]["waiting_for_you"] is None
    listing = cli.ok("ls", "--all").stdout
    assert "down (by your word)" in listing and "down (by rgt)" in listing

    billing = after["gpu"]["still_billing"]  # a block volume the provider may keep
    assert billing and "gpu" in cli.ok("ls").stdout  # a down box still shown while it bills
    dismissed = cli.ok("dismiss", "gpu").stdout
    assert all(line[:40] in dismissed for line in billing)
    assert boxes(cli)["gpu"]["still_billing"] == []
    assert boxes(cli)["gpu"]["dismissed_billing"]["lines"] == billing
    assert "gpu" not in cli.ok("ls").stdout
    refused = cli("dismiss", "nothere")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
