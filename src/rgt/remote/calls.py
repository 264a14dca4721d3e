"""Run the stdlib-only scripts of `rgt.onbox` on a box, shipped on stdin (nothing installed)."""

from __future__ import annotations

import shlex
from typing import Any

from rgt.boxread import MAX_ANSWER, box_json
from rgt.errors import UserError
from rgt.onbox import script_source
from rgt.textsafe import terminal_text
from rgt.transport import Transport


def run_json(transport: Transport, name: str, *args: str, timeout: float = 120,
             ok_codes: tuple[int, ...] = (0,)) -> Any:
    """Run onbox/NAME.py with ARGS on the box (under the interpreter `rgt up` found) and parse
    the JSON it prints."""
    command = f"{shlex.quote(transport.python)} - " + " ".join(shlex.quote(a) for a in args)
    result = transport.run(command, stdin=script_source(name), timeout=timeout, check=False,
                           limit=MAX_ANSWER)  # the box's answer never grows this process
    if result.rc not in ok_codes and not result.truncated:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise UserError(f"on-box {name} failed (exit {result.rc}): "
                        f"{terminal_text(' | '.join(tail)[-600:])}")
    return box_json(result.stdout, f"the on-box {name}", truncated=result.truncated)


def write_file(transport: Transport, path: str, data: bytes, *, mode: str = "600") -> None:
    """Write a file on the box from stdin, atomically (tmp + rename), with the given mode."""
    quoted = shlex.quote(path)
    tmp = shlex.quote(f"{path}.tmp")
    transport.run(f"umask 077 && mkdir -p \"$(dirname {quoted})\" && cat > {tmp} && "
                  f"chmod {mode} {tmp} && mv -f {tmp} {quoted}", stdin=data, timeout=60)
