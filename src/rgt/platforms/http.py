"""One small HTTP client for the cloud control planes (Lambda Cloud, vast.ai).

Why its own module: every API here fails the same few ways, and each way has one right answer.

- The key is read from the environment **by name** when the client is made; a missing key is a
  `UserError` before any request leaves the machine. The key never appears in argv, in an error,
  or in a log line (`scrub` removes it from anything we echo back).
- 401/403 means the key is missing or wrong: say which environment variable to fix.
- 429 and 5xx are the control plane's problem, not the user's: retry with exponential backoff
  (honouring `Retry-After`), a bounded number of times, then say what failed.
- Any other 4xx is the API refusing the request: raise `ApiError` carrying the API's own code and
  message, so the caller can turn a known code (insufficient capacity, wrong region) into advice.

The base URL can be overridden by an environment variable (`RGT_LAMBDA_API_URL`,
`RGT_VAST_API_URL`) so tests point the real client at local fake servers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import httpx

from rgt.errors import UserError

log = logging.getLogger("rgt.platforms.http")

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class ApiError(UserError):
    """The control plane refused a request (a 4xx other than 401/403, or retries ran out)."""

    def __init__(self, message: str, *, status: int | None = None, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class ApiClient:
    """A JSON API behind a key held in an environment variable.

    `auth` is "basic" (key as the user name, empty password: Lambda's documented curl -u KEY:)
    or "bearer" (Authorization: Bearer KEY: vast.ai, and Lambda accepts it too).
    """

    def __init__(self, *, service: str, key_env: str, url_env: str, default_url: str,
                 auth: str = "bearer", retries: int = 4, backoff_s: float = 0.5,
                 max_backoff_s: float = 8.0, timeout_s: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.service = service
        self.key_env = key_env
        key = os.environ.get(key_env, "").strip()
        if not key:
            raise UserError(f"{key_env} is not set: export your {service} API key in this shell "
                            f"(rgt reads it from the environment by name and never prints it)")
        self._key = key
        self.base_url = (os.environ.get(url_env) or default_url).rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep
        headers = {"Accept": "application/json", "User-Agent": "rgt"}
        basic = None
        if auth == "basic":
            basic = httpx.BasicAuth(key, "")
        else:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(base_url=self.base_url, headers=headers, auth=basic,
                                  timeout=timeout_s)

    # plumbing ------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        """`text` with the key blanked out: nothing we echo may carry it."""
        return text.replace(self._key, "***") if self._key else text

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        if response is not None and (after := response.headers.get("Retry-After")):
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own backoff
                delay = min(self.max_backoff_s, max(0.0, float(after)))
        return delay

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: Any = None) -> Any:
        """Send one request, retrying 429/5xx and network errors; return the parsed JSON body."""
        what = f"{method} {path}"
        for attempt in range(self.retries + 1):
            response: httpx.Response | None = None
            try:
                response = self._http.request(method, path, params=params, json=json)
            except httpx.TransportError as err:
                reason = self.scrub(f"{type(err).__name__}: {err}")
                if attempt >= self.retries:
                    raise ApiError(f"cannot reach the {self.service} API at {self.base_url} "
                                   f"({reason}) after {attempt + 1} tries; check the network "
                                   f"and try again") from None
                log.warning("%s: %s; retrying", what, reason)
                self._sleep(self._delay(attempt, None))
                continue
            if response.status_code in (401, 403):
                raise UserError(f"{self.key_env} is missing or wrong: the {self.service} API "
                                f"answered {response.status_code} to {what}. Create a key in "
                                f"the console and export it as {self.key_env}")
            if response.status_code in RETRY_STATUS:
                if attempt >= self.retries:
                    raise self._error(response, what,
                                      f"still failing after {attempt + 1} tries")
                log.warning("%s: HTTP %s; retrying", what, response.status_code)
                self._sleep(self._delay(attempt, response))
                continue
            if response.status_code >= 400:
                raise self._error(response, what)
            if not response.content:
                return None
            try:
                return response.json()
            except ValueError:
                raise ApiError(f"the {self.service} API answered {what} with something that is "
                               f"not JSON (HTTP {response.status_code})",
                               status=response.status_code) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, response: httpx.Response, what: str, extra: str = "") -> ApiError:
        code = message = suggestion = ""
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict):  # Lambda: {"error": {"code", "message", "suggestion"}}
                code = str(err.get("code") or "")
                message = str(err.get("message") or "")
                suggestion = str(err.get("suggestion") or "")
            else:  # vast.ai: {"success": false, "error": "...", "msg": "..."}
                code = str(err or "")
                message = str(body.get("msg") or body.get("message") or "")
        elif response.text:
            message = response.text[:200]
        code, message, suggestion = (self.scrub(x) for x in (code, message, suggestion))
        text = f"the {self.service} API refused {what} (HTTP {response.status_code}"
        text += f", {code})" if code else ")"
        if message:
            text += f": {message}"
        if suggestion:
            text += f" — {suggestion}"
        if extra:
            text += f" ({extra})"
        return ApiError(text, status=response.status_code, code=code)

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


def poll_interval() -> float:
    """Seconds between control-plane polls; `RGT_CLOUD_POLL_S` shortens it (tests, impatience)."""
    try:
        return max(0.01, float(os.environ.get("RGT_CLOUD_POLL_S", "") or 5))
    except ValueError:
        return 5.0
