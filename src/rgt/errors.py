"""Errors a user can act on.

Every user mistake ends as a `UserError`: the CLI prints its message on one line and exits
with its code, never a traceback. The message says what is wrong and what to do next.
"""

from __future__ import annotations  # rgt.ckpt ships this module to boxes with Python 3.8


class UserError(Exception):
    """A problem with the user's input or situation, not a bug in rgt."""

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


def did_you_mean(word: str, choices) -> str:
    """" — did you mean 'x'?" naming the choice closest to a mistyped word (case aside), or ""
    when none is close: `rgt watch gpu1` for the box gpu-1."""
    import difflib  # only on the way to an error message

    by_lower = {str(choice).lower(): str(choice) for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" — did you mean {by_lower[close[0]]!r}?" if close else ""
