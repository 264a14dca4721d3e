"""rgt's verbs, listed without importing them.

`rgt --help` and `rgt ls` should answer at once. Importing every verb's module first would pull
in pydantic, httpx, PyYAML and the whole lifecycle (~0.3 s here) only to print a list or a
table. So the top-level command table is written out below — each verb's name, the module that
defines it and the first paragraph of its help — and a verb's module is imported only when that
verb runs or its own `--help` is asked for. tests/test_cli_startup.py holds this table to the
modules (same names, help and hidden flags) and checks what `--help` and `ls` import.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

from typer.core import TyperCommand, TyperGroup, TyperOption

from rgt.cli.coerce import use_fast_coercion


@dataclass(frozen=True)
class Verb:
    name: str
    module: str  # the module whose import registers it on `rgt.cli.app`
    help: str  # the first paragraph of its docstring (or its sub-app's help)
    hidden: bool = False


_CLI = "rgt.cli."
# In the order a newcomer meets them: the lifecycle first, then the platform data.
VERBS: tuple[Verb, ...] = (
    Verb("demo", _CLI + "demo_cmd",
         "Run the whole lifecycle on this machine: up → run → watch → pull → verify → down."),
    Verb("up", _CLI + "lifecycle_cmd",
         "Register a box you rented (--ssh/--host) or this machine, and check that it answers."),
    Verb("audit", _CLI + "audit_cmd",
         "Measure the box (disks, inodes, memory, GPUs, Python/torch, tools) and judge it."),
    Verb("smoke", _CLI + "lifecycle_cmd",
         "Run the job's smoke command here on the CPU before renting (fails on traceback)."),
    Verb("run", _CLI + "lifecycle_cmd",
         "Push the workdir, send secrets on stdin, start the job detached, and follow its log."),
    Verb("render", _CLI + "lifecycle_cmd",
         "Print what a platform would submit for a job, without any box or cluster."),
    Verb("watch", _CLI + "watch_cmd",
         "The run's real state: reconciled with its process, heartbeat, disks, latest metrics."),
    Verb("logs", _CLI + "lifecycle_cmd", "Print the run's log (stdout and stderr, unbuffered)."),
    Verb("ssh", _CLI + "ssh_cmd",
         "A shell on the box (or CMD), as rgt reaches it: its endpoint, key, jump hosts, ssh "
         "config."),
    Verb("pull", _CLI + "lifecycle_cmd",
         "Fetch the run's outputs and checkpoints, re-hash them here, load every checkpoint."),
    Verb("verify", _CLI + "verify_cmd",
         "Re-hash and re-load a run's pulled files against the box's manifests its pull kept."),
    Verb("down", _CLI + "lifecycle_cmd",
         "Stop the meter — only after every run is pulled and verified (the Iron Law)."),
    Verb("autostop", _CLI + "autodown_cmd",
         "Take a box down once it has had no live run for N minutes (Iron Law kept)."),
    Verb("ls", _CLI + "ls_cmd",
         "Every box: state, up-time, money spent, live runs, and the clocks that are running."),
    Verb("dismiss", _CLI + "ls_cmd",
         "Say you dealt with what still bills for a box that is down: `rgt ls` stops showing "
         "it."),
    Verb("top", _CLI + "top_cmd",
         "A live table of every box and run: money, clocks, step, loss, ETA. Ctrl-C quits."),
    Verb("plot", _CLI + "top_cmd",
         "Draw the loss and the other metrics the run logged: in the terminal, and to a PNG."),
    Verb("runs", _CLI + "runs_cmd",
         "Every run: status (live runs asked afresh), attempt chain, age, whether it was "
         "pulled."),
    Verb("resume", _CLI + "runs_cmd",
         "Relaunch a failed, cancelled, preempted or vanished run from its job's checkpoints."),
    Verb("cancel", _CLI + "runs_cmd",
         "Stop a live run: SIGTERM so the trainer checkpoints, SIGKILL after the grace."),
    Verb("doctor", _CLI + "doctor_cmd",
         "Read the run's log and the box's probe and list the gotchas that apply, with evidence."),
    Verb("offers", _CLI + "cloud_cmd",
         "What a renting platform has now: vast.ai offers, Lambda capacity, RunPod stock."),
    Verb("cloud-status", _CLI + "cloud_cmd",
         "What the platform's API says about a rented box's instance, and what it means."),
    Verb("rent", _CLI + "cloud_cmd",
         "Old spelling of `rgt up NAME --profile lambda|vastai ...` (rents through the API).",
         hidden=True),
    Verb("profiles", _CLI + "profiles_cmd",
         "List every platform profile: what stops the meter, and what that costs you."),
    Verb("profile", _CLI + "profiles_cmd", "One platform profile in full."),
    Verb("gotcha", _CLI + "profiles_cmd",
         "Explain one gotcha by id, or `rgt gotcha search TEXT` to match a pasted error line "
         "or block (a word starting with `-` is part of the paste)."),
    Verb("compare", _CLI + "profiles_cmd",
         "Two platforms side by side: what each action stops, keeps, and keeps billing."),
    Verb("ckpt", _CLI + "ckpt_cmd",
         "Inspect checkpoints (rgt.ckpt, torch, Lightning, safetensors, HF checkpoint-N, "
         "accelerate save_state, torch.distributed.checkpoint): list them, verify one."),
    Verb("mcp", _CLI + "mcp_cmd",
         "Serve rgt's verbs to a coding agent over MCP (stdio); destructive steps need `rgt "
         "approve`."),
    Verb("approve", _CLI + "mcp_cmd",
         "Approve one destructive step a coding agent asked for (shown first; type the box "
         "name)."),
)
BY_NAME = {verb.name: verb for verb in VERBS}


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value: Typer would print `<bool>` beside it, which reads as if it took
    one (`--yes <bool>`). Nothing there; a flag's --no- form, where it has one, still shows."""
    return None if self.is_bool_flag else _TYPED(self, ctx)


# Typer has the hook display_type_rich from 0.29; older ones print the `<bool>` as they do
_TYPED = getattr(TyperOption, "display_type_rich", None)
if _TYPED is not None:
    TyperOption.display_type_rich = _flag_type  # every verb's help, and --help/--version


class _Listed(TyperCommand):
    """A verb as `rgt --help` lists it: name and help only, its module not imported yet."""


class LazyVerbs(TyperGroup):
    """The top-level `rgt` group: every verb of VERBS is listed, and is real once resolved."""

    def __init__(self, *, commands: dict[str, Any] | None = None, **attrs: Any) -> None:
        # Verbs already imported (a test that imported a module, a verb loaded earlier) are
        # used as they are; the rest stand in as listings. Table order, then any others.
        loaded = dict(commands or {})
        for command in loaded.values():
            _reflow(command)
        ordered = {v.name: loaded.pop(v.name, None)
                   or _Listed(name=v.name, help=v.help, hidden=v.hidden) for v in VERBS}
        super().__init__(commands={**ordered, **loaded}, **attrs)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        use_fast_coercion(self)  # `rgt`'s own options (--version, completion) are read here
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        guessing = not ctx.resilient_parsing  # (a Tab's parse names nothing)
        if guessing and args and args[0] not in self.commands and args[0] in ELSEWHERE:
            ctx.fail(f"No such command {args[0]!r}. {ELSEWHERE[args[0]]}")
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Listed):
            command = self.commands[name] = load(name)
        if guessing and name == "profile" and rest and rest[0] not in command.commands:
            _profile_named(ctx, rest[0])
        if command is not None:
            use_fast_coercion(command)  # its values without pydantic (rgt.cli.coerce)
            _ctrl_c_is_the_verbs_from_its_start(command)
        return name, command, rest


# What users of SkyPilot, dstack or plain ssh type, and what rgt calls it: said in Click's own
# "No such command" line (its spelling guess would offer `cloud-status` for `status`).
ELSEWHERE = {
    "status": "Did you mean `rgt ls` (every box: state, money, clocks)? `rgt runs` lists "
              "every run; `rgt watch BOX` is one run's state",
    "exec": "Did you mean `rgt run BOX -- CMD` (this directory as the workdir)?",
    "attach": "Did you mean `rgt ssh BOX` (a shell) or `rgt logs BOX -f` (the run's output)?",
    "queue": "Did you mean `rgt runs` (every run, with its attempts)?",
}


def _ctrl_c_is_the_verbs_from_its_start(command: Any) -> None:
    """Keep the entry's "stopped before it started" Ctrl-C (rgt/__main__.py) until the verb's
    own function starts, then hand Ctrl-C to the verb (rgt.cli.verbs_handle_ctrl_c). Until
    then nothing has been done, and a KeyboardInterrupt met by the verb module's import or its
    parameters' parsing can come out as something else: pydantic turns one that meets a model
    being built into a SchemaError, a traceback instead of one line and 130."""
    for sub in (getattr(command, "commands", None) or {}).values():
        _ctrl_c_is_the_verbs_from_its_start(sub)
    callback = getattr(command, "callback", None)
    if getattr(command, "commands", None) or callback is None \
            or getattr(callback, "hands_ctrl_c_to_the_verb", False):
        return

    @functools.wraps(callback)
    def verb(*args: Any, **kwargs: Any) -> Any:
        from rgt.cli import verbs_handle_ctrl_c

        verbs_handle_ctrl_c()
        return callback(*args, **kwargs)

    verb.hands_ctrl_c_to_the_verb = True  # type: ignore[attr-defined]
    command.callback = verb


def _profile_named(ctx: Any, word: str) -> None:
    """`rgt profile autodl` names a profile where `profile` wants a subcommand: say the one
    that shows it (only for a profile that exists; Click words any other word)."""
    from rgt.profiles.files import profile_files

    if word in profile_files():
        ctx.fail(f"No such command {word!r}. Did you mean `rgt profile show {word}`?")


def _reflow(command: Any) -> None:
    """Join the lines of each help paragraph (and of its subcommands'), as `rgt --help` does.

    Typer's rich help keeps a docstring's line breaks after the first paragraph, so text
    wrapped at 100 columns in the source came out re-wrapped around those breaks: a short
    line after every long one at 80 columns. A paragraph starting with \\b is left as it is.
    """
    if command.help:
        paragraphs = command.help.split("\n\n")
        command.help = "\n\n".join(
            p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
            for p in paragraphs)
    for sub in (getattr(command, "commands", None) or {}).values():
        _reflow(sub)


def load(name: str) -> Any:
    """Import the verb's module and build its real command (a group for `profile`, `ckpt`)."""
    import typer.main

    from rgt.cli import app

    importlib.import_module(BY_NAME[name].module)
    command = typer.main.get_group(app).commands.get(name)
    if command is None or isinstance(command, _Listed):
        raise RuntimeError(f"{BY_NAME[name].module} does not define the verb {name!r}")
    from rgt.cli.complete import attach

    attach(command, name)  # its boxes, runs and profiles for the shell's Tab
    return command
