"""The one reader of what a box answers: a byte budget, a depth limit and types (DESIGN.md,
"The box sends bytes, not values"; issue 28).

The box is someone else's machine and its interpreter can lie. Before this reader, a 300 MB
probe answer cost the laptop 924 MB, an answer nested 200,000 deep raised RecursionError in
`watch`, `pull` and `down`, and one with a string where an object belongs raised
AttributeError. Here:

- **Bytes**: a command's answer is captured up to `MAX_ANSWER` bytes and no further (the
  transports' `run(..., limit=)` stops reading and ends the command past it); a longer one is
  refused, never parsed.
- **Depth**: JSON nested deeper than `MAX_DEPTH` is refused (the parser's own recursion limit
  is caught too: its RecursionError never reaches a user).
- **Types**: `checked(value, shape, what)` holds a parsed answer to a shape — the types of the
  fields a verb acts on, the most items a list may have — before any `.get` runs on it.

Every refusal is `BoxGarbage`: one line naming the answer and what was wrong with it (the
box is named by the verb that asked, `with_box`), exit 2.
"""

from __future__ import annotations

import json
from typing import Any

from rgt.errors import UserError
from rgt.textsafe import terminal_text

MAX_ANSWER = 4 * 1024 * 1024  # an on-box script's JSON answer; the probe's is ~10 KB
MAX_DEPTH = 32  # the probe's deepest honest answer is 4 levels
MAX_ITEMS = 10_000  # items of one list in an answer (checkpoint names, disks, log lines)


class BoxGarbage(UserError):
    """A box answered something rgt cannot use: too big, too deep, not JSON, mistyped."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.box: str | None = None

    def __str__(self) -> str:
        said = super().__str__()
        return f"box {self.box}: {said}" if self.box else said


def with_box(err: BoxGarbage, box: str) -> BoxGarbage:
    """ERR naming BOX (the first name given sticks)."""
    err.box = err.box or box
    return err


def box_json(raw: str | bytes, what: str, *, truncated: bool = False) -> Any:
    """RAW, the answer to WHAT, as a JSON value within the budget and depth; BoxGarbage
    otherwise. TRUNCATED: the transport stopped reading at its limit."""
    if truncated or len(raw) > MAX_ANSWER:
        raise BoxGarbage(f"{what} answered more than {MAX_ANSWER // 1024 // 1024} MB; rgt "
                         "stopped reading (an honest answer is a few KB): the box's "
                         "interpreter or its files are not what rgt put there")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BoxGarbage(f"{what} answered JSON nested deeper than this laptop parses; "
                         "nothing of it was used") from None
    except (ValueError, UnicodeDecodeError):
        head = raw[:120] if isinstance(raw, str) else raw[:120].decode("utf-8", "replace")
        raise BoxGarbage(f"{what} answered something that is not JSON: "
                         f"{terminal_text(head)!s}") from None
    too_deep(value, what)
    return value


def too_deep(value: Any, what: str, limit: int = MAX_DEPTH) -> None:
    """Refuse VALUE when its lists and objects nest deeper than LIMIT (walked without
    recursion: a value built elsewhere may be as deep as memory allows)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise BoxGarbage(f"{what} answered JSON nested deeper than {limit} levels; "
                                 "nothing of it was used")
            todo.extend((child, depth + 1) for child in
                        (item.values() if isinstance(item, dict) else item))


# ----------------------------------------------------------------------------- shapes
# A shape is a type (or tuple of types) a value must be, a dict {key: shape} for an object
# whose listed keys must have those shapes, or a one-item list [shape] for a list of them.
# None is always allowed where a field may be missing; a bool is never a number.

NUMBER = (int, float)
TEXT = str


def checked(value: Any, shape: Any, what: str) -> Any:
    """VALUE when it has SHAPE (see above); BoxGarbage naming the first field that does not."""
    _check(value, shape, what)
    return value


def _check(value: Any, shape: Any, where: str) -> None:
    if value is None:
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise _wrong(where, value, "an object")
        for key, inner in shape.items():
            _check(value.get(key), inner, f"{where}.{key}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise _wrong(where, value, "a list")
        if len(value) > MAX_ITEMS:
            raise BoxGarbage(f"{where} lists {len(value)} items; more than {MAX_ITEMS} is "
                             "not an honest answer")
        for i, item in enumerate(value):
            if item is None:
                raise _wrong(f"{where}[{i}]", item, "a value")
            _check(item, shape[0], f"{where}[{i}]")
    else:
        types = shape if isinstance(shape, tuple) else (shape,)
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            raise _wrong(where, value, " or ".join(_NAMES.get(t, t.__name__) for t in types))


_NAMES = {str: "text", int: "an integer", float: "a number", dict: "an object",
          list: "a list", bool: "true/false"}


def _wrong(where: str, value: Any, wanted: str) -> BoxGarbage:
    got = _NAMES.get(type(value), type(value).__name__)
    if value is None:
        got = "null"
    return BoxGarbage(f"{where} is {got}, not {wanted}: the answer cannot be trusted")


# ----------------------------------------------------------------------------- a run's log

MAX_LOG_BYTES = 8 * 1024 * 1024  # what one `rgt logs` or one `watch --follow` poll reads
MAX_LOG_LINE = 64 * 1024  # a longer log line is shown as its last this many characters
STALL_S = 10  # a log read that has sent nothing for this long is a stalled sender


class LogChunk(str):
    """Log text from a box that also carries the bytes it was decoded from (`data`): a follow
    offset counts those bytes (invalid UTF-8 decodes to fewer or more of them), and
    `rgt logs --raw` prints them as they came. `cut`: the box had more than was read."""

    data: bytes
    cut: bool

    def __new__(cls, data: bytes, *, cut: bool = False) -> LogChunk:
        chunk = super().__new__(cls, data.decode("utf-8", "replace"))
        chunk.data, chunk.cut = data, cut
        return chunk


def cut_long_lines(text: str, limit: int = MAX_LOG_LINE) -> str:
    """TEXT with every line longer than LIMIT shown as its last LIMIT characters behind a
    marker saying how much was cut (a progress bar's `\\r` updates end where it stands now)."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if len(line) > limit:
            lines[i] = f"[rgt: {len(line) - limit} characters of this line cut] " + \
                line[-limit:]
    return "\n".join(lines)
