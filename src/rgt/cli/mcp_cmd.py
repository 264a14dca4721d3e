"""`rgt mcp` (the MCP server for coding agents) and `rgt approve CODE` (the human's side of
the destructive steps an agent asks for). See rgt.agent."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer
from rich.panel import Panel

from rgt.cli import app
from rgt.cli.confirm import typed_name
from rgt.cli.console import console, escape
from rgt.errors import UserError


@app.command("mcp")
def mcp() -> None:
    """Serve rgt's verbs to a coding agent over MCP (stdio); destructive steps need `rgt approve`.

    Add it to an MCP client as the command `rgt mcp`. Needs the `mcp` extra: in rgt's
    checkout, pip install -e '.[mcp]'.
    """
    try:
        from rgt.agent.server import serve
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("mcp"):
            raise
        raise UserError("rgt mcp needs the MCP SDK: pip install 'mcp>=2.3,<3' in rgt's "
                        "environment (from rgt's checkout: pip install -e '.[mcp]')") from None
    serve()


@app.command("approve")
def approve(code: Annotated[str, typer.Argument(help="The code the agent's tool answered.")]
            ) -> None:
    """Approve one destructive step a coding agent asked for (shown first; type the box name).

    Run it in your own terminal: it refuses a stdin or stdout that is not a terminal, so an
    agent's plain shell command cannot answer it. Each code is for one action on one box,
    once, within 10 minutes.
    """
    from rgt.agent import approvals

    if not (sys.stdin.isatty() and sys.stdout.isatty()):  # the step shown, the name typed
        raise UserError("rgt approve asks the person at a terminal and its stdin or stdout is "
                        "not one (a pipe, a script, an agent's shell): run it in your own "
                        "terminal; nothing was approved")
    request = approvals.load(code)
    left = request.expires - time.time()
    if left <= 0:
        raise UserError(f"approval request {request.code} expired {-left:.0f} s ago; nothing "
                        "was approved. The agent asks again for a fresh code")
    lines = [f"[bold]{escape(approvals.describe(request.action))}[/]"]
    lines += [_line(key, value) for key, value in request.preview.items()
              if value not in (None, [], "")]
    lines.append(f"[dim]asked {time.time() - request.created:.0f} s ago; the code expires in "
                 f"{left:.0f} s[/]")
    console.print(Panel("\n".join(lines), title=f"an agent asks: {request.code}", expand=False))
    box = str(request.action.get("box"))
    if not typed_name(f"Type the box name ({box}) to approve", box, verb="approve",
                      unchanged="nothing was approved",
                      instead="there is none: an approval is typed by a person"):
        raise UserError("the name did not match; nothing was approved", exit_code=1)
    approvals.grant(request)
    console.print(f"[green]✓[/] approved {escape(request.code)}: the agent's next call with "
                  "it completes the step, once")


def _line(key: str, value: Any) -> str:
    label = key.replace("_", " ")
    if isinstance(value, list):
        return f"{escape(label)}:" + "".join(f"\n  • {escape(str(v))}" for v in value)
    return f"{escape(label)}: {escape(str(value))}"
