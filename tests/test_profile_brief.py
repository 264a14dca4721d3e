"""rgt.profiles.brief: what `rgt ls` shows of a platform, cached beside the store and never
staler than the profile file it came from."""

from __future__ import annotations

import os

import pytest
import yaml

from rgt.profiles.brief import brief
from rgt.profiles.files import DATA_DIR
from rgt.profiles.loader import ProfileError


@pytest.fixture
def shadow(tmp_path, monkeypatch):
    """A user's own `local` profile (RGT_PROFILE_PATH), whose first danger clock we edit."""
    directory = tmp_path / "profiles"
    directory.mkdir()
    monkeypatch.setenv("RGT_PROFILE_PATH", str(directory))
    data = yaml.safe_load((DATA_DIR / "local.yaml").read_text(encoding="utf-8"))

    def write(clock: str) -> None:
        data["surface"]["danger_clocks"] = [clock]
        (directory / "local.yaml").write_text(yaml.safe_dump(data, allow_unicode=True),
                                              encoding="utf-8")
    return write


def test_brief_is_cached_and_follows_the_file(tmp_path, shadow):
    cache = tmp_path / "cache"
    shadow("first clock")
    assert brief("local", cache).danger_clocks == ("first clock",)
    assert (cache / "profile-briefs.json").is_file()
    assert brief("local", cache).kind == "local"
    shadow("a second, longer clock")  # another size: a miss, validated afresh
    assert brief("local", cache).danger_clocks == ("a second, longer clock",)
    shadow("same size clock here!!")  # the same size, a later mtime: a miss too
    path = tmp_path / "profiles" / "local.yaml"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert brief("local", cache).danger_clocks == ("same size clock here!!",)


def test_a_bad_cache_or_profile_is_never_trusted(tmp_path, shadow):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "profile-briefs.json").write_text("{not json")
    shadow("the clock")
    assert brief("local", cache).danger_clocks == ("the clock",)  # and rewritten whole
    assert "the clock" in (cache / "profile-briefs.json").read_text()
    (tmp_path / "profiles" / "local.yaml").write_text("name: local\nfacts: 3\n")
    with pytest.raises(ProfileError, match="local.yaml"):
        brief("local", cache)
    with pytest.raises(ProfileError, match="did you mean 'local'"):
        brief("locl", cache)


def test_an_unwritable_cache_costs_only_speed(tmp_path, shadow):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would go")
    shadow("the clock")
    assert brief("local", blocker).danger_clocks == ("the clock",)
