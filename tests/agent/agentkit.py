"""The agent's side of an MCP session, and the human at a real terminal (a pty) typing into
`rgt approve`: helpers for tests/agent."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from pathlib import Path

from mcp.client.session import ClientSession


class Agent:
    """The agent's side: call a tool, read its one JSON text answer."""

    def __init__(self, portal, session: ClientSession, home: Path) -> None:
        self.portal, self.session, self.home = portal, session, home
        self.progress: list[tuple[float, str | None]] = []

    def raw(self, tool: str, **arguments) -> str:
        async def progressed(progress: float, total: float | None, message: str | None):
            self.progress.append((progress, message))

        result = self.portal.call(lambda: self.session.call_tool(
            tool, {k: v for k, v in arguments.items() if v is not None},
            progress_callback=progressed))
        assert not result.is_error, result.content
        (content,) = result.content
        return content.text

    def __call__(self, tool: str, **arguments) -> dict:
        return json.loads(self.raw(tool, **arguments))

    def tools(self) -> list:
        return self.portal.call(self.session.list_tools).tools


def approve_at_terminal(home: Path, code: str, typed: str | None, timeout: float = 60
                        ) -> tuple[int, str]:
    """The human: `rgt approve CODE` on a terminal (a pty), typing TYPED at its prompt (None:
    type nothing, the command must end by itself). Returns (exit code, what it showed)."""
    env = {**os.environ, "RGT_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "120"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin, stdout and stderr
        os.execve(sys.executable, [sys.executable, "-m", "rgt", "approve", code], env)
    shown, answered = b"", typed is None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            if not answered and b"to approve:" in shown:
                os.write(fd, typed.encode() + b"\n")
                answered = True
        else:
            os.kill(pid, 9)
            raise AssertionError(f"rgt approve did not end: {shown!r}")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode("utf-8", "replace")
