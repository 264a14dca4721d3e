"""Platforms declare their own `rgt up` / `rgt offers` flags (rgt.platforms.options, and a
`flags.py` beside each platform's `platform.py`); the CLI builds its flags from them, so no
platform's flag is written in rgt.cli (issue 30).

Held here: rgt.cli names no platform's flag; the declarations import nothing heavy; every
declared flag, given on the command line, reaches `Request.options` (`OfferQuery.options`)
under its key; and each platform takes exactly what it declares: a flag it declares is not
refused as foreign, one it does not declare is refused by name before anything is rented.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from rgt.cli import app, verbs
from rgt.errors import UserError
from rgt.lifecycle.cloud import offers
from rgt.platforms import REGISTRY, platform_for
from rgt.platforms.base import OfferQuery, Request
from rgt.platforms.options import RESOURCES, declared, union
from rgt.spec import Resources
from rgt.store import Store

CLI = Path(__file__).parents[1] / "src" / "rgt" / "cli"
VOCABULARY = {o.name for o in RESOURCES}
PLATFORMS_OWN = {o.name: o for verb in ("up", "offers") for o in union(verb)}
SAMPLE = {str: "x1", int: 3, float: 2.5, bool: True}  # as the command line gives them
KEYS = ("LAMBDA_API_KEY", "VAST_API_KEY", "RUNPOD_API_KEY")


def _commands() -> dict:
    """Every verb's click command, each verb's module imported (the lazy table's too)."""
    for module in {v.module for v in verbs.VERBS}:
        __import__(module)
    return typer.main.get_group(app).commands


def _own_parameters(command) -> set[str]:
    """The parameters a command's function writes out itself (not those added for flags)."""
    code = inspect.unwrap(command.callback).__code__
    return set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


def _sample(option) -> object:
    if option.name == "gpu":
        return "H100:1"
    if option.max is not None:  # a fraction
        return option.max
    return ("A_NAME", "B_NAME") if option.repeatable else SAMPLE[option.type]


def _argv(option) -> list[str]:
    if option.type is bool:
        return [option.flag]
    values = _sample(option)
    return [word for v in (values if option.repeatable else [values])
            for word in (option.flag, str(v))]


def test_cli_writes_no_platforms_flag():
    own = PLATFORMS_OWN.keys() - VOCABULARY
    assert {"filesystem", "offer", "volume", "namespace", "drive", "min_reliability"} <= own
    for source in sorted(CLI.glob("*.py")):
        text = source.read_text(encoding="utf-8")
        written = [PLATFORMS_OWN[n].flag for n in sorted(own)
                   if re.search(re.escape(PLATFORMS_OWN[n].flag) + r"(?![\w-])", text)]
        assert not written, f"{source.name} writes a platform's flag: {written}"
    for name, command in _commands().items():
        if getattr(command, "callback", None) is not None:
            assert not _own_parameters(command) & own, f"`rgt {name}` defines a platform's flag"


def test_declarations_import_nothing_heavy():
    script = ("import json, sys\nfrom rgt.platforms.options import union\n"
              "union('up'); union('offers')\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
              "('pydantic', 'httpx', 'yaml', 'typer') or m in ('rgt.spec', 'rgt.store', "
              "'rgt.platforms.base', 'rgt.profiles') or m.endswith('.platform'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("verb", ["up", "rent"])
def test_up_takes_the_vocabulary_and_every_platforms_flags(verb):
    from rgt.cli import cloud_cmd

    command = _commands()[verb]
    names = {p.name for p in command.params}
    assert names == _own_parameters(command) | VOCABULARY | {o.name for o in union("up")}
    panels = {p.name: p.rich_help_panel for p in command.params}
    for option in [*RESOURCES, *union("up")]:
        assert panels[option.name] == option.panel, option.name
        params = command.make_context(verb, ["b", "-p", "vastai", *_argv(option)]).params
        flags = {k: v for k, v in params.items() if k not in _own_parameters(command)}
        resources, options = cloud_cmd.up_request(**flags)
        if option.name in VOCABULARY:
            assert option.name in resources and not options, option.name
        else:
            expected = tuple(_sample(option)) if option.repeatable else _sample(option)
            assert options == {option.option_key: expected} and not resources, option.name


def test_offers_takes_every_platforms_filters():
    from rgt.cli import cloud_cmd

    command = _commands()["offers"]
    assert {o.name for o in union("offers")} <= {p.name for p in command.params}
    for option in union("offers"):
        params = command.make_context("offers", _argv(option)).params
        flags = {k: v for k, v in params.items() if k not in _own_parameters(command)}
        assert cloud_cmd.given(union("offers"), flags) == {option.option_key: _sample(option)}


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    """No API key and no kubeconfig: a platform that gets past its refusals stops at its
    credentials, never at a network."""
    monkeypatch.setenv("RGT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    return Store(tmp_path / "state.db")


def _foreign(message: str) -> bool:
    return "does not apply" in message


@pytest.mark.parametrize("profile", list(REGISTRY))
def test_a_platform_takes_what_it_declares_and_refuses_the_rest(profile, no_credentials):
    """`provision` with each platform flag alone: refused as foreign exactly when the profile
    does not declare it, the refusal naming the flag."""
    own = {o.option_key for o in declared("up")[profile]}
    platform = platform_for(profile)
    for option in union("up"):
        value = tuple(_sample(option)) if option.repeatable else _sample(option)
        request = Request(name="b", resources=Resources(),
                          options={option.option_key: value})
        try:
            platform.provision(no_credentials, request)
            said = ""
        except UserError as err:
            said = str(err)
        if option.option_key in own:
            assert not _foreign(said), (profile, option.name, said)
        else:
            assert _foreign(said), (profile, option.name, said)
            named = {option.flag, "--" + option.option_key.replace("_", "-")}
            assert any(flag in said for flag in named), (profile, option.name, said)


@pytest.mark.parametrize("profile", list(REGISTRY))
def test_offers_filters_are_taken_or_refused_as_declared(profile, no_credentials):
    own = {o.option_key for o in declared("offers")[profile]}
    for option in union("offers"):
        query = OfferQuery(options={option.option_key: _sample(option)})
        with pytest.raises(UserError) as said:  # at the latest: the missing API key
            offers(profile, query)  # as `rgt offers` asks
        if "has no offers" in str(said.value):  # it rents nothing through an API
            assert not own, profile
            continue
        assert _foreign(str(said.value)) == (option.option_key not in own), \
            (profile, option.name, str(said.value))


NEW_PLATFORM = {
    "platform.py": '''
from rgt.errors import UserError
from rgt.platforms.ssh import SshPlatform


class Paperspace(SshPlatform):
    def provision(self, store, request):
        raise UserError(f"paperspace was asked: {sorted(request.options.items())}")
''',
    "flags.py": '''
from rgt.platforms.options import WAIT, Option

UP = (Option("machine_type", str, "Machine type (A4000, P5000).", "Rent on Paperspace"), WAIT)
''',
}


def test_a_new_platforms_flags_need_no_cli_edit(tmp_path):
    """A platform folder (platform.py, flags.py) and its REGISTRY line: `rgt up` shows its
    flag in its panel and hands the value to its `provision` (standing in for kaggle, whose
    profile exists and which declares no flags)."""
    package = tmp_path / "paperspace"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in NEW_PLATFORM.items():
        (package / name).write_text(text)
    script = (f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
              "from rgt.platforms import REGISTRY\n"
              "REGISTRY['kaggle'] = 'paperspace.platform:Paperspace'\n"
              "from rgt.cli import main\nsys.argv = ['rgt', *sys.argv[1:]]\nmain()\n")
    env = {"RGT_HOME": str(tmp_path / "home"), "COLUMNS": "200", "NO_COLOR": "1"}
    shown = subprocess.run([sys.executable, "-c", script, "up", "--help"], capture_output=True,
                           text=True, timeout=120, env={**os.environ, **env})
    assert shown.returncode == 0, shown.stderr
    panel = shown.stdout[shown.stdout.index("Rent on Paperspace"):]
    assert "--machine-type" in panel.split("╰")[0], shown.stdout
    asked = subprocess.run([sys.executable, "-c", script, "up", "b", "-p", "kaggle",
                            "--machine-type", "A4000", "--wait", "60"], capture_output=True,
                           text=True, timeout=120, env={**os.environ, **env})
    assert asked.returncode == 2, asked.stderr
    assert "[('machine_type', 'A4000'), ('wait', 60.0)]" in asked.stderr, asked.stderr
