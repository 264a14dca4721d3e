"""The README's "Coding agents (MCP)" section, as written: the client snippets start a server
that answers, the tools it names are the server's, and its numbers are the code's.
(Its ```bash lines are parsed by tests/test_readme_examples.py; the client snippets are
indented blocks, which that test does not take, so they are checked here.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from rgt.agent import approvals
from rgt.agent.results import MAX_RESULT_BYTES

README = Path(__file__).parents[2] / "README.md"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Coding agents (MCP)")
    return text[start:text.index("\n## ", start + 1)]


def indented_blocks(text: str) -> list[str]:
    return [m.strip() for m in re.findall(r"\n\n((?:    \S.*\n)+)", text)]


def test_the_client_snippets_start_a_server_with_the_named_tools(tmp_path):
    text = section()
    snippets = indented_blocks(text)
    config = next(json.loads(s) for s in snippets if s.startswith("{"))["mcpServers"]["rgt"]
    claude = next(shlex.split(s) for s in snippets if s.startswith("claude "))
    assert claude[:5] == ["claude", "mcp", "add", "rgt", "--"]
    assert claude[5:] == [config["command"], *config["args"]], "both add the same server"
    assert shutil.which(config["command"]), "the console script the snippets name"

    named = set(re.findall(r"`(\w+)`", text[text.index("The tools:"):text.index("**Destr")]))
    params = StdioServerParameters(command=config["command"], args=config["args"],
                                   env={"RGT_HOME": str(tmp_path), "PATH": os.environ["PATH"]})

    async def tools() -> set[str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            listed = (await s.list_tools()).tools
            profiles = json.loads((await s.call_tool("profiles", {})).content[0].text)
            assert profiles["ok"] and profiles["result"]["profiles"]
            return {t.name for t in listed}

    served = anyio.run(tools)
    tool_names = named - {"dry_run", "until_done", "discard_results", "fresh"}  # arguments
    assert tool_names == served, (tool_names ^ served)


def test_the_sections_numbers_are_the_codes():
    text = " ".join(section().split())
    assert f"at most {MAX_RESULT_BYTES // 1024} KB" in text
    assert f"for {approvals.TTL_S // 60} minutes" in text
    assert approvals.CODE_SHAPE.fullmatch(re.search(r"rgt approve (\S+)", text)[1])
