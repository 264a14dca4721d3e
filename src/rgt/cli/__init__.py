"""The `rgt` command. Thin: parse, call into the library, render with Rich.

Every `UserError` raised below ends here as one line on stderr and its exit code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from typing import NoReturn

import typer
from rich.text import Text

from rgt import hostos
from rgt.boxread import BoxGarbage
from rgt.cli.console import err_console
from rgt.cli.verbs import LazyVerbs
from rgt.errors import UserError
from rgt.textsafe import terminal_text

# The second paragraph answers the newcomer's question "which of these shows me my run?".
HELP = ("Remote GPU trainer: one lifecycle for rented GPUs, with the teardown Iron Law enforced."
        "\n\nWhich verb when: `watch BOX` is one run's state now, checked on the box (-f "
        "follows it to its end); `logs BOX` is what the run printed (-f streams it); `top` "
        "keeps every box and run on one live screen; `runs` is the history (attempts, pulled "
        "or not); `ls` is every box, its money and its clocks; `ssh BOX` is a shell there. "
        "A run is named by its id, any unique start or end of it (7d92), or @last / @-1.")

app = typer.Typer(
    name="rgt",
    cls=LazyVerbs,  # lists every verb; imports a verb's module only when it runs (verbs.py)
    help=HELP,
    no_args_is_help=True,
    add_completion=False,  # rgt's own --install-completion below: Typer's costs pydantic
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every verb
)


def _version(value: bool) -> None:
    if value:
        from rgt import __version__

        print(f"rgt {__version__}")
        raise typer.Exit()


def _install_completion(value: bool) -> None:
    if value:
        from rgt.cli.complete import install

        print(install())
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print rgt's version and exit."),
    install_completion: bool = typer.Option(
        False, "--install-completion", callback=_install_completion, is_eager=True,
        help="Complete boxes, run ids and profiles on Tab in this shell (bash, zsh, fish, "
             "PowerShell)."),
) -> None:
    """Remote GPU trainer: one lifecycle for rented GPUs, with the teardown Iron Law enforced."""


def main() -> None:
    # Typer renders usage errors, --help, Ctrl-C and a closed pipe, and exits with their codes;
    # only our own errors come back out of it.
    try:
        hostos.check_supported()  # native Windows: one line saying to use WSL, for every verb
        # Ctrl-C stays the entry's "stopped before it started" until the verb's own function
        # starts (rgt.cli.verbs hands it over there, after the verb's imports and parsing)
        if "_RGT_COMPLETE" in os.environ:  # the shell's Tab asking (rgt.cli.complete)
            from rgt.cli.complete import answering_the_shell

            answering_the_shell()
        app(complete_var="_RGT_COMPLETE")  # the same whether started as rgt or python -m rgt
    except KeyboardInterrupt:  # between the handler and Typer's own catch, or after it
        _exit_interrupted(f"{_this_verb()} stopped (Ctrl-C)")
    except SystemExit as done:
        # Typer turns a Ctrl-C that no verb explained into a silent exit 130; say it in a line.
        if done.code == EXIT_INTERRUPTED and _from_ctrl_c(done):
            _exit_interrupted(f"{_this_verb()} stopped (Ctrl-C)")
        # The verb is over and its answer given: a Ctrl-C during the interpreter's exit would
        # only turn that exit status into a death by SIGINT, with nothing said.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise
    except UserError as err:
        message = _verb_named(str(err)) if isinstance(err, BoxGarbage) else str(err)
        if err.exit_code == EXIT_INTERRUPTED:  # rgt.lifecycle.interrupt's, after its cleanup
            _exit_interrupted(message)
        _say(message)
        sys.exit(err.exit_code)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A full laptop disk (RGT_HOME, a pull destination) is the user's to fix, not a bug.
        _say(f"no space left writing {err.filename or 'a file'} ({err.strerror}): free space "
             "there (df -h and df -i) and run the command again; files rgt writes are "
             "written whole or not at all")
        sys.exit(2)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C'd command


def verbs_handle_ctrl_c() -> None:
    """Python's KeyboardInterrupt from here on, in place of the entry's "stopped before it
    started" (rgt/__main__.py): every verb cleans up after a Ctrl-C its own way. A SIGINT the
    parent shell ignored (a background job) stays ignored, as Python itself leaves it."""
    if threading.current_thread() is threading.main_thread() \
            and getattr(signal.getsignal(signal.SIGINT), "before_the_verb", False):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _exit_interrupted(message: str) -> NoReturn:
    """The Ctrl-C line, then exit 130 without Python's finalization. CPython (3.11 at least)
    remembers a KeyboardInterrupt that met a string being exec'd (dataclasses and pydantic
    build their classes so, while a verb's module imports) even once it was caught, and at a
    normal exit kills itself with SIGINT instead of returning 130. The verb has cleaned up by
    now; only our own buffered output is left, and it is flushed first."""
    _say(message)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def _from_ctrl_c(done: SystemExit) -> bool:
    """Whether this exit is Typer's for a KeyboardInterrupt (its Exit(130) raised from it)."""
    cause = done.__context__
    return cause is not None and isinstance(cause.__cause__, KeyboardInterrupt)


def _say(message: str) -> None:
    # A Text, not markup: messages carry rsync's "[sender=3.2.7]", paths, box output, which
    # may hold terminal escapes too (the one sanitiser shows them escaped).
    err_console.print(Text.assemble(("error:", "bold red"), " ",
                                    terminal_text(message, lines=True)),
                      highlight=False, soft_wrap=True)


def _verb_named(message: str) -> str:
    """A garbage answer's line, saying which verb asked: `rgt watch: box b: …`."""
    verb = _this_verb()
    return f"{verb}: {message}" if verb != "rgt" else message


def _this_verb() -> str:
    """`rgt watch`, `rgt ckpt ls`, or `rgt` when no verb was named."""
    words = [w for w in sys.argv[1:3] if not w.startswith("-")]
    return " ".join(["rgt", *(words[:2] if words[:1] == ["ckpt"] else words[:1])])
