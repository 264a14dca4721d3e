"""The one sanitiser for text from a box on its way to a terminal (DESIGN.md, "Words, crashes
and bytes"; issue 28).

A terminal obeys what it is sent: an OSC 52 sequence writes the user's clipboard, OSC 8 makes
a hyperlink, OSC 0/2 sets the window title, CSI moves the cursor or erases lines (enough to
paint a fake "✓ verified" over a real error), DCS talks to the terminal itself. Anything the
box wrote — a file name, state.json's `signal`, a sync error, a metric key, an error's tail —
can carry them. Two rules, one tokenizer:

- `terminal_text` (names, fields, messages, listings): every control character — C0 (U+0000
  to U+001F, ``\\t`` and ``\\n`` kept only where the caller says so), DEL, C1 (U+0080 to
  U+009F, which some terminals read as 8-bit CSI/OSC), the bidirectional overrides and
  isolates (U+202A-U+202E, U+2066-U+2069, which reorder what is shown) and the line and
  paragraph separators (U+2028/U+2029) — is *shown*, escaped as ``\\x1b`` / ``\\u202e``, so
  the sequence is visible and inert. Nothing is dropped: a name stays recognisable.
- `LogFilter` / `log_text` (the job's own log: `rgt logs`, `watch --follow`, `run`
  following): colours (SGR, ``ESC [ digits ; : m``), carriage returns (progress bars), tabs,
  newlines and backspaces stay; every other escape sequence (OSC, DCS, SOS, PM, APC, any
  other CSI, two-byte escapes) and every other control character are *removed*, so the log
  reads as it would have, minus what could set titles, clipboards, hyperlinks or move the
  cursor elsewhere. `rgt logs --raw` gives the bytes unchanged to a user who asks.
"""

from __future__ import annotations

import re

# Shown escaped wherever box text becomes terminal text.
_BEYOND_C0 = "\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_UNSAFE_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")  # \t and \n stay


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def terminal_text(text: object, *, lines: bool = False) -> str:
    """TEXT (any value: it is str()-ed) with every control character shown escaped. With
    LINES, newlines and tabs stay as they are (multi-line messages); otherwise the result is
    one line, whatever the box put in it."""
    text = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_LINES if lines else _UNSAFE_ONE_LINE
    return pattern.sub(_shown, text) if pattern.search(text) else text


# ----------------------------------------------------------------------------- the job's log

# One escape sequence, complete: CSI (ESC [ or U+009B, parameters, intermediates, a final
# byte); a string sequence (OSC ESC ] / U+009D, DCS ESC P / U+0090, SOS ESC X / U+0098,
# PM ESC ^ / U+009E, APC ESC _ / U+009F) up to its terminator (BEL or ST: ESC \ / U+009C);
# any other ESC + intermediates + final byte.
_CSI = r"(?:\x1b\[|\x9b)([\x30-\x3f]*)([\x20-\x2f]*)([\x40-\x7e])"
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
_OTHER = r"\x1b[\x20-\x2f]*[\x30-\x4f\x51-\x57\x59\x5a\x5c\x60-\x7e]"  # not [ ] P X ^ _
_SEQUENCE = re.compile(f"{_CSI}|{_STRING}|{_OTHER}")
_SGR_PARAMS = re.compile(r"[0-9;:]*")
# What may start a sequence that the next chunk completes (kept back by LogFilter).
_OPENER = re.compile(r"(?:\x1b|\x9b|[\x90\x98\x9d\x9e\x9f])")
_LOG_CONTROLS = re.compile("[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f"
                           "\u202a-\u202e\u2066-\u2069]")  # keeps \b \t \n \r
MAX_PENDING = 4096  # an unfinished sequence longer than this is not waited for any more


_LOG_TOKEN = re.compile(f"{_SEQUENCE.pattern}|{_LOG_CONTROLS.pattern}")


def _keep_colours(match: re.Match[str]) -> str:
    params, intermediates, final = match.group(1, 2, 3)
    if final == "m" and not intermediates and _SGR_PARAMS.fullmatch(params or "") \
            and match.group().startswith("\x1b"):
        return match.group()  # SGR: a colour or a weight, nothing else
    return ""  # any other sequence, or a lone control character


def log_text(text: str) -> str:
    """One complete piece of the job's log, safe to print: colours and carriage returns kept,
    every other escape sequence and control character removed."""
    return LogFilter().feed(text, final=True)


class LogFilter:
    """`log_text` for a stream that arrives in pieces (`watch --follow`): a sequence cut
    between two pieces is held back until the next one completes it (at most MAX_PENDING
    characters; past that it is dropped as garbage)."""

    def __init__(self) -> None:
        self.pending = ""

    def feed(self, text: str, *, final: bool = False) -> str:
        text = self.pending + text
        self.pending = ""
        if not _LOG_CONTROLS.search(text):  # most logs: one scan (0.05 s for 8 MB), no sub
            return text
        if not final:
            cut = _unfinished_from(text)
            if cut is not None:
                text, self.pending = text[:cut], text[cut:]
                if len(self.pending) > MAX_PENDING:
                    self.pending = ""
        return _LOG_TOKEN.sub(_keep_colours, text)


def _unfinished_from(text: str) -> int | None:
    """Where an escape sequence that TEXT ends in the middle of starts, if one does."""
    start = max(0, len(text) - MAX_PENDING - 1)
    for opener in _OPENER.finditer(text, start):  # the first: an OSC cut at its ESC \\
        if _could_grow(text[opener.start():]):
            return opener.start()
    return None


def _could_grow(rest: str) -> bool:
    """Whether REST, an opener with no complete sequence behind it, may be one cut short."""
    if rest in ("\x1b",):
        return True
    if re.fullmatch(r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*", rest):
        return True
    if re.fullmatch(r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*\x1b?", rest):
        return True
    return bool(re.fullmatch(r"\x1b[\x20-\x2f]+", rest))
