"""`rgt ssh BOX [-- CMD]`: a shell or a command on the box, with port forwards."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from rgt.cli import app
from rgt.cli.args import BoxArg
from rgt.cli.console import err_console, escape
from rgt.errors import UserError

ForwardOpt = Annotated[list[str] | None, typer.Option(metavar="SPEC", show_default=False)]


@app.command("ssh")
def ssh_cmd(
    name: BoxArg,
    command: Annotated[list[str] | None, typer.Argument(
        metavar="[-- CMD...]", show_default=False,
        help="Run this instead of a shell (its words joined by spaces, as ssh does).")] = None,
    port: Annotated[list[str] | None, typer.Option(
        "--port", metavar="N|LOCAL:REMOTE", show_default=False,
        help="Forward 127.0.0.1:N here to port N on the box (TensorBoard, Jupyter) and print "
             "the URL; repeatable.")] = None,
    local: Annotated[list[str] | None, typer.Option(
        "-L", metavar="SPEC", show_default=False,
        help="ssh's -L [BIND:]PORT:HOST:HOSTPORT, as is; repeatable.")] = None,
    remote: Annotated[list[str] | None, typer.Option(
        "-R", metavar="SPEC", show_default=False,
        help="ssh's -R [BIND:]PORT:HOST:HOSTPORT, as is; repeatable.")] = None,
    no_shell: Annotated[bool, typer.Option(
        "-N", help="Only the forwards, no shell (Ctrl-C closes them).")] = False,
    node: Annotated[int | None, typer.Option(
        help="A group's node, by rank (default: the head, 0); its forwards are that "
             "node's.")] = None,
) -> None:
    """A shell on the box (or CMD), as rgt reaches it: its endpoint, key, jump hosts, ssh config.

    Forwards close with the session. On a group of machines: the head, or --node N. On Slurm:
    the node of the box's live run, through the login node (else the login node). Exit code:
    the command's, or ssh's 255.
    """
    from rgt.lifecycle.ssh_session import session
    from rgt.store import Store

    tty = bool(command) and sys.stdin.isatty() and sys.stdout.isatty()
    planned = session(Store(), name, command or [], local=local or [], remote=remote or [],
                      ports=port or [], no_shell=no_shell, tty=tty, node=node)
    for note in planned.notes:
        # one line each, however narrow the terminal: the terminal wraps it, not rich
        err_console.print(f"[dim]{escape(note)}[/]", highlight=False, soft_wrap=True)
    for url in planned.urls:
        err_console.print(f"open [bold]{escape(url)}[/] (while this session lasts)",
                          highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(planned.argv[0], planned.argv)  # ssh owns the terminal and the exit code
    except OSError as err:
        raise UserError(f"cannot start ssh ({err.strerror}): install OpenSSH's client") from None
