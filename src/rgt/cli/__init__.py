"""The `rgt` command. Thin: parse, call into the library, render with Rich.

Every `UserError` raised below ends here as one line on stderr and its exit code.
"""

from __future__ import annotations

import sys

import typer

from rgt.cli.console import err_console
from rgt.errors import UserError

app = typer.Typer(
    name="rgt",
    help="Remote GPU trainer: one lifecycle for rented GPUs, with the teardown Iron Law enforced.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # Imported here so each command module can `from rgt.cli import app` without a cycle.
    from rgt.cli import cloud_cmd, demo_cmd, lifecycle_cmd, profiles_cmd  # noqa: F401
    from rgt.cli.ckpt_cmd import ckpt_app

    app.add_typer(ckpt_app, name="ckpt")


_register()


def main() -> None:
    try:
        code = app(standalone_mode=False)  # returns a typer.Exit code instead of exiting
    except UserError as err:
        err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        sys.exit(err.exit_code)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as err:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(err, click.ClickException):
            err.show()
            sys.exit(err.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)
