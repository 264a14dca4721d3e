"""Typed confirmations (`rgt down`, `rgt cancel`): the box's name, typed by a person.

Click's prompt turns both Ctrl-C and a closed stdin into "Aborted!" and exit 1, which says
neither what was left undone nor how a script confirms. Here Ctrl-C is one line and exit 130
(nothing changed), and no answer at all (stdin at its end: `</dev/null`, a CI job) is one
line saying how to confirm without a prompt, exit 2.
"""

from __future__ import annotations

import sys

from rgt.errors import UserError
from rgt.lifecycle.interrupt import Interrupted


def typed_name(question: str, name: str, *, verb: str, unchanged: str, instead: str) -> bool:
    """Ask QUESTION; True when the answer is NAME. `unchanged` says what stays as it was
    ("nothing was changed"), `instead` how to confirm without a terminal."""
    try:  # a Ctrl-C as the question is written counts too: Typer would exit 130 silently
        sys.stdout.write(f"{question}: ")
        sys.stdout.flush()
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        raise Interrupted(f"rgt {verb} stopped at the prompt (Ctrl-C); {unchanged}") from None
    if not answer:  # end of input: nobody is there to type
        sys.stdout.write("\n")
        raise UserError(f"rgt {verb} needs the box name typed at its prompt and stdin gave none; "
                        f"{unchanged}. Without a terminal: {instead}")
    return answer.strip() == name
