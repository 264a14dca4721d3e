"""The `rgt` command. Thin: parse, call into the library, render with Rich.

Every `UserError` raised below ends here as one line on stderr and its exit code.
"""

from __future__ import annotations

import errno
import sys

import typer
from rich.text import Text

from rgt import hostos
from rgt.boxread import BoxGarbage
from rgt.cli.console import err_console
from rgt.cli.verbs import LazyVerbs
from rgt.errors import UserError
from rgt.textsafe import terminal_text

app = typer.Typer(
    name="rgt",
    cls=LazyVerbs,  # lists every verb; imports a verb's module only when it runs (verbs.py)
    help="Remote GPU trainer: one lifecycle for rented GPUs, with the teardown Iron Law enforced.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every verb
)


def _version(value: bool) -> None:
    if value:
        from rgt import __version__

        print(f"rgt {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print rgt's version and exit."),
) -> None:
    """Remote GPU trainer: one lifecycle for rented GPUs, with the teardown Iron Law enforced."""


def main() -> None:
    # Typer renders usage errors, --help, Ctrl-C and a closed pipe, and exits with their codes;
    # only our own errors come back out of it.
    try:
        hostos.check_supported()  # native Windows: one line saying to use WSL, for every verb
        app()
    except UserError as err:
        _say(_verb_named(str(err)) if isinstance(err, BoxGarbage) else str(err))
        sys.exit(err.exit_code)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A full laptop disk (RGT_HOME, a pull destination) is the user's to fix, not a bug.
        _say(f"no space left writing {err.filename or 'a file'} ({err.strerror}): free space "
             "there (df -h and df -i) and run the command again; files rgt writes are "
             "written whole or not at all")
        sys.exit(2)


def _say(message: str) -> None:
    # A Text, not markup: messages carry rsync's "[sender=3.2.7]", paths, box output, which
    # may hold terminal escapes too (the one sanitiser shows them escaped).
    err_console.print(Text.assemble(("error:", "bold red"), " ",
                                    terminal_text(message, lines=True)),
                      highlight=False, soft_wrap=True)


def _verb_named(message: str) -> str:
    """A garbage answer's line, saying which verb asked: `rgt watch: box b: …`."""
    words = [w for w in sys.argv[1:3] if not w.startswith("-")]
    verb = " ".join(words[:2]) if words[:1] == ["ckpt"] else " ".join(words[:1])
    return f"rgt {verb}: {message}" if verb else message
