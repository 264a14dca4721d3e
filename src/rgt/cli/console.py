"""The two consoles every command writes to: results on stdout, diagnostics on stderr."""

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


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
