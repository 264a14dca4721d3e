"""The human `profile show` carries what JSON carries: each action's storage effect and notes."""

from __future__ import annotations

from cli import rgt

from rgt.profiles import load_profile


def test_teardown_section_shows_storage_and_notes_for_every_action():
    result = rgt("profile", "show", "autodl", "--section", "teardown")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # Rich folds long lines
    autodl = load_profile("autodl")
    release = autodl.action("release")
    assert release is not None and release.notes
    assert "storage: keeps file-storage; loses system-disk, data-disk" in out
    assert " ".join(release.notes.split())[:60] in out
    assert out.count("storage:") == len(autodl.actions)
