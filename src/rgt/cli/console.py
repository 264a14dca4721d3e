"""The two consoles every command writes to: results on stdout, diagnostics on stderr.

Strings printed on them are Rich markup: anything interpolated that rgt did not write itself
(messages, paths, box output, names from an API) goes through `escape` here, or is a `Text`
made with `safe_text`. Both run the one sanitiser (`rgt.textsafe.terminal_text`) first: Rich
escapes its markup and drops BEL and CR, but prints ESC and C1 sequences as they are, and a
name from a box can hold one that writes the clipboard or repaints the screen.
"""

import json
import re
from typing import Any

from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.panel import Panel
from rich.text import Text

from rgt.textsafe import terminal_text

# No emoji codes: escape() leaves ":100:" alone, and a log line or path holding one would be
# printed as 💯.
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)


def escape(text: object, *, lines: bool = True) -> str:
    """TEXT as Rich markup that prints exactly what it says: control characters shown
    escaped (`terminal_text`; newlines and tabs kept unless LINES is False), markup escaped."""
    return _markup_escape(terminal_text(text, lines=lines))


def safe_text(text: object, style: str = "") -> Text:
    """TEXT (not markup) as a Rich Text, its control characters shown escaped."""
    return Text(terminal_text(text, lines=True), style=style)


def duration(seconds: float | None) -> str:
    """A short human duration: 42s, 3m05s, 2h10m, 1d04h."""
    if seconds is None:
        return "?"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def print_registered(box, profile, first: bool, then: str = "") -> None:
    """What every newly registered box shows: its directories, the platform's danger clocks
    on the user's first box of that platform, and the next step."""
    console.print(f"  data    {escape(box.data_dir)}\n  durable {escape(box.durable_dir)}")
    from rgt.boxfacts import facts  # imported when a box is shown, not at every start

    found = facts(box)
    if found.python:  # what runs rgt's on-box scripts, found once at `up`
        console.print(f"  python  {escape(found.python)} "
                      f"{escape(str(found.python_version))} "
                      f"({escape(str(found.python_executable))})")
    if first:
        lines = [f"[bold red]⚠ {escape(c)}[/]" for c in profile.surface.danger_clocks]
        lines += [f"[green]✓[/] {escape(c)}" for c in profile.surface.conveniences]
        console.print(Panel("\n".join(lines), title=f"First {profile.name} box: know this",
                            expand=False))
    console.print(f"Next: [bold]rgt audit {box.name}[/], then [bold]rgt run {box.name} "
                  f"JOB.yaml[/]{then}")


JSON_SCHEMA = 1  # bumped only when a field changes meaning or goes away; new fields may appear


def print_checkpoints(report: dict[str, Any]) -> None:
    """One line per checkpoint a pull (or `rgt verify`) checked: its kind, step and what was
    checked, ✓ when it loads, ! when it does not."""
    for unit in report.get("checkpoints") or []:
        mark = "[green]✓[/]" if unit["ok"] else "[yellow]![/]"
        console.print(f"{mark} {escape(unit['path'])}: {unit['kind']} step {unit['step']} "
                      f"(checked: {', '.join(unit['checked']) or 'nothing'})")


def print_json(verb: str, **payload: Any) -> None:
    """One `--json` document: {"schema": 1, "verb": VERB, <noun>: ...} on stdout (README:
    "JSON output"). Plain print: Rich would wrap long lines and break the JSON for a pipe."""
    text = json.dumps({"schema": JSON_SCHEMA, "verb": verb, **payload}, indent=2,
                      ensure_ascii=False, default=str)
    # json escapes C0 but not DEL, C1 or the bidi and line-separator marks: \u-escape them too
    # (the same JSON to a parser, inert on a terminal)
    print(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
