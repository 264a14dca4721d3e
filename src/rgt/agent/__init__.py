"""rgt for coding agents: an MCP server (`rgt mcp`) whose tools are rgt's verbs, and the
human's side of its destructive steps (`rgt approve CODE`).

- `approvals`: one-time codes bound to one exact action, granted only by `rgt approve` in the
  human's terminal. Needs no MCP SDK (the `approve` verb works on a base install).
- `results`: what reaches the agent: box text sanitised, marked as data, bounded in size.
- `verbs`: how a tool runs a verb (the `rgt` CLI with --json, in a child process).
- `gates`: the destructive steps (down, cancel, run --fresh, renting): a preview, a code, and
  the step itself once approved.
- `server`: the MCP tools (imports the `mcp` SDK: the `mcp` extra).
"""
