"""One-time approvals: a destructive step an agent asked for completes only after the human
ran `rgt approve CODE` in their own terminal.

The files live under RGT_HOME/approvals/ (0700, each file 0600):

- ``requests/CODE.json``: written by the MCP server when an agent asks for a destructive step:
  the exact action (verb, box, run, flags, spec hash), what it would do (the preview the human
  is shown), when it was asked and when it expires.
- ``granted/CODE.json``: written by `rgt approve` once the human typed the box name: the
  request's digest, so a request edited after the approval no longer matches.
- ``used/CODE.json``: the grant, moved here (one rename) by the step that used it. A second
  use finds no grant to move.

What this does and does not protect (README, "Coding agents (MCP)"): nothing the agent sends
through the MCP tools can complete the step. The code alone is nothing: the grant file is
written only by `rgt approve`, which wants a terminal on stdin. An agent that can run shell
commands as the same user can write these files, run `rgt down` itself, or drive a pty; the
approval stops the MCP path (and an agent talked into a teardown by text in a log), not a
user's own account turned against them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.errors import UserError
from rgt.store import rgt_home

TTL_S = 600  # an approval is asked for now: ten minutes to give it and use it
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: typed by a person
CODE_SHAPE = re.compile(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}")


class ApprovalRefused(UserError):
    """An approval code that does not complete this step (unknown, not approved yet, expired,
    used, or approved for another action)."""


@dataclass(frozen=True)
class Request:
    code: str
    action: dict[str, Any]  # verb, box, and whatever else pins it: run, flags, spec hash
    preview: dict[str, Any]  # what the step would do, as the human is shown it
    created: float
    expires: float

    @property
    def digest(self) -> str:
        """The request as approved: a grant names it, so an edited request is not granted."""
        body = json.dumps([self.code, self.action, self.preview, self.created, self.expires],
                          sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(body.encode()).hexdigest()


def approvals_dir(sub: str) -> Path:
    root = rgt_home() / "approvals"
    path = root / sub
    for folder in (root, path):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is cut by the umask
    return path


def ask(action: dict[str, Any], preview: dict[str, Any], *, now: float | None = None) -> Request:
    """Record a request for ACTION and return it with its fresh code."""
    now = time.time() if now is None else now
    _forget_stale(now)
    while True:
        raw = "".join(secrets.choice(_ALPHABET) for _ in range(8))
        code = f"{raw[:4]}-{raw[4:]}"
        request = Request(code, action, preview, now, now + TTL_S)
        try:
            _write_new(approvals_dir("requests") / f"{code}.json", {
                "code": code, "action": action, "preview": preview, "created": now,
                "expires": request.expires})
        except FileExistsError:  # 32**8 codes: a clash is rare, never reused
            continue
        return request


def load(code: str) -> Request:
    """The request CODE names, or ApprovalRefused saying why there is none."""
    code = code.strip().upper()
    if not CODE_SHAPE.fullmatch(code):
        raise ApprovalRefused(f"{code[:40]!r} is not an approval code (they look like "
                              "ABCD-EF23)")
    path = approvals_dir("requests") / f"{code}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Request(data["code"], data["action"], data["preview"], float(data["created"]),
                       float(data["expires"]))
    except FileNotFoundError:
        if (approvals_dir("used") / f"{code}.json").exists():
            raise ApprovalRefused(f"approval {code} was already used; each code completes "
                                  "one step once") from None
        raise ApprovalRefused(f"no approval request {code}: codes come from the tool that "
                              "asked for the step") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ApprovalRefused(f"approval request {code} is unreadable ({err}); ask again"
                              ) from None


def grant(request: Request, *, now: float | None = None) -> None:
    """The human's approval (`rgt approve`, after the box name was typed)."""
    now = time.time() if now is None else now
    if now >= request.expires:
        raise ApprovalRefused(f"approval request {request.code} expired "
                              f"{_ago(now - request.expires)} ago; nothing was approved. "
                              "The agent asks again for a fresh code")
    try:
        _write_new(approvals_dir("granted") / f"{request.code}.json",
                   {"code": request.code, "digest": request.digest, "granted": now})
    except FileExistsError:
        raise ApprovalRefused(f"approval {request.code} was already given") from None


def use(code: str, action: dict[str, Any], *, now: float | None = None) -> Request:
    """Spend CODE on ACTION: the request must be this exact action, unexpired, granted by
    `rgt approve` for this very request, and not used before. Returns the request."""
    request = check(code, action, now=now)
    granted = approvals_dir("granted") / f"{request.code}.json"
    try:  # one rename: of two uses racing, one finds the grant gone
        os.rename(granted, approvals_dir("used") / f"{request.code}.json")
    except FileNotFoundError:
        raise ApprovalRefused(f"approval {request.code} was already used") from None
    with contextlib.suppress(OSError):
        (approvals_dir("requests") / f"{request.code}.json").unlink()
        _write_new(approvals_dir("used") / f"{request.code}.request.json",
                   {"action": request.action, "used": time.time() if now is None else now})
    return request


def check(code: str, action: dict[str, Any], *, now: float | None = None) -> Request:
    """What `use` checks, spending nothing: ApprovalRefused unless CODE completes ACTION."""
    now = time.time() if now is None else now
    request = load(code)
    if request.action != action:
        raise ApprovalRefused(f"approval {request.code} was given for {describe(request.action)}"
                              f", not for {describe(action)}; nothing was done")
    if now >= request.expires:
        raise ApprovalRefused(f"approval {request.code} expired {_ago(now - request.expires)} "
                              "ago; nothing was done. Ask again for a fresh code")
    granted = approvals_dir("granted") / f"{request.code}.json"
    try:
        grant_data = json.loads(granted.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ApprovalRefused(f"approval {request.code} is not given yet: the human types "
                              f"`rgt approve {request.code}` in their own terminal") from None
    except (OSError, ValueError) as err:
        raise ApprovalRefused(f"approval {request.code} is unreadable ({err})") from None
    if not isinstance(grant_data, dict) or grant_data.get("digest") != request.digest:
        raise ApprovalRefused(f"approval {request.code} does not match its request (the "
                              "request changed after it was approved); nothing was done")
    return request


def _forget_stale(now: float) -> None:
    """Remove requests (and their grants) expired a day ago: nothing can use them, and the
    folder would only grow. Used ones stay in used/, the record of what was approved."""
    for folder in ("requests", "granted"):
        for path in approvals_dir(folder).glob("*.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < now - TTL_S - 86400:
                    path.unlink()


def describe(action: dict[str, Any]) -> str:
    """`down of box b`, `cancel of run r on box b`: what a request is for, in words."""
    what = str(action.get("verb"))
    if action.get("run"):
        return f"{what} of run {action['run']} on box {action.get('box')}"
    return f"{what} of box {action.get('box')}"


def _write_new(path: Path, data: dict[str, Any]) -> None:
    """Create PATH (0600, refusing one that exists) with DATA, whole: written under a temp
    name, then linked into place (link fails on an existing name, unlike rename)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, default=str)
            out.flush()
            os.fsync(out.fileno())
        os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
