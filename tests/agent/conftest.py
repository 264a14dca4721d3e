"""A real MCP client session (the SDK's stdio client) against `python -m rgt mcp`, one per test
module, with its own RGT_HOME."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio.from_thread
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).parent))  # agentkit

from agentkit import Agent  # noqa: E402
from sshd import SshServer, sshd_keys, sshd_server  # noqa: E402, F401  (fixtures)


@pytest.fixture(scope="module")
def agent(tmp_path_factory) -> Agent:
    home = tmp_path_factory.mktemp("agent") / "rgt-home"
    params = StdioServerParameters(command=sys.executable, args=["-m", "rgt", "mcp"],
                                   env={"RGT_HOME": str(home), "PATH": os.environ["PATH"]},
                                   cwd=str(home.parent))
    with anyio.from_thread.start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(stdio_client(params)) as (read, write), \
            portal.wrap_async_context_manager(ClientSession(read, write)) as session:
        portal.call(session.initialize)
        yield Agent(portal, session, home)
