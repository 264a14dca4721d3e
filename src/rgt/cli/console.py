"""The two consoles every command writes to: results on stdout, diagnostics on stderr."""

from rich.console import Console

console = Console()
err_console = Console(stderr=True)
