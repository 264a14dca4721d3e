"""One small HTTP client for the cloud control planes (Lambda Cloud, vast.ai).

Why its own module: every API here fails the same few ways, and each way has one right answer.

- The key is read from the environment **by name** when the client is made; a missing key is a
  `UserError` before any request leaves the machine. The key never appears in argv, in an error,
  or in a log line (`scrub` removes it from anything we echo back).
- 401/403 means the key is missing or wrong: say which environment variable to fix — unless the
  API names another cause (Lambda's 403 `global/account-inactive`), which is then said instead.
  RunPod answers 403 to a valid key without a permission (`key_refused=(401,)`): its refusal.
- 429 and 5xx are the control plane's problem, not the user's: retry with jittered exponential
  backoff (honouring `Retry-After`), a bounded number of times, then say what failed with the
  API's own text (vast.ai's 429 carries it in `detail`). Not vast.ai's 429
  `search_quota_exceeded`: a daily quota that a retry only spends; said at once, with its reset.
- A create (`idempotent=False`: Lambda's launch, vast.ai's `PUT /asks/{id}/`) is NEVER retried
  after the request may have reached the server (a 5xx, a timeout, a dropped connection): the
  work may have been done, and a second create is a second bill. It raises `AmbiguousCreate`,
  and the caller lists instances by the name it gave the create and adopts what exists. A 429
  and a refused connection are retried: the request was not processed.
- Every request is paced by the API's `RatePolicy` (its documented limits), one policy per API,
  shared by every call the client makes.
- A 3xx is an error that names the redirect (a wrong base URL or an API move), never followed:
  a redirect can turn a POST into a GET, or send the key to another host.
- Any other 4xx is the API refusing the request: raise `ApiError` carrying the API's own code and
  message, so the caller can turn a known code (insufficient capacity, wrong region) into advice.

The base URL can be overridden by an environment variable (`RGT_LAMBDA_API_URL`,
`RGT_VAST_API_URL`) so tests point the real client at local fake servers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
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


class AmbiguousCreate(ApiError):
    """A create whose answer was lost (5xx, timeout, dropped connection): it may have happened.

    Never retry it; look for what it made (by the name/label given to it) and adopt that."""


@dataclass(frozen=True)
class RatePolicy:
    """One API's documented request limits, shared by every call of one client.

    `min_interval_s` is the least gap between any two requests; `path_intervals` adds a longer
    gap between requests to one path (Lambda: one launch per 10 s). `RGT_CLOUD_RATE_SCALE`
    scales every gap (tests run the same pacing at a hundredth of the speed)."""

    min_interval_s: float = 0.0
    path_intervals: tuple[tuple[str, float], ...] = ()
    retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    def gaps(self, path: str) -> list[tuple[str, float]]:
        scale = rate_scale()
        out = [("*", self.min_interval_s * scale)]
        out += [(p, gap * scale) for p, gap in self.path_intervals if path.startswith(p)]
        return out


def rate_scale() -> float:
    try:
        return max(0.0, float(os.environ.get("RGT_CLOUD_RATE_SCALE", "") or 1))
    except ValueError:
        return 1.0


class ApiClient:
    """A JSON API behind a key held in an environment variable.

    `auth` is "basic" (key as the user name, empty password: Lambda's documented curl -u KEY:)
    or "bearer" (Authorization: Bearer KEY: vast.ai, and Lambda accepts it too).
    """

    def __init__(self, *, service: str, key_env: str, url_env: str, default_url: str,
                 auth: str = "bearer", policy: RatePolicy | None = None,
                 retries: int | None = None, backoff_s: float | None = None,
                 max_backoff_s: float | None = None, timeout_s: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep, jitter: bool = True,
                 key_refused: tuple[int, ...] = (401, 403)) -> None:
        self.service = service
        self.key_env = key_env
        # the statuses that mean "this key is wrong"; RunPod answers 403 to a GOOD key that
        # lacks a permission, which is then said as the API's own refusal
        self.key_refused = key_refused
        key = os.environ.get(key_env, "").strip()
        if not key:
            raise UserError(f"{key_env} is not set: export your {service} API key in this shell "
                            f"(rgt reads it from the environment by name and never prints it)")
        self._key = key
        self.base_url = (os.environ.get(url_env) or default_url).rstrip("/")
        self.policy = policy or RatePolicy()
        self.retries = self.policy.retries if retries is None else retries
        self.backoff_s = self.policy.backoff_s if backoff_s is None else backoff_s
        self.max_backoff_s = self.policy.max_backoff_s if max_backoff_s is None else max_backoff_s
        self.jitter = jitter
        self._sleep = sleep
        self._last: dict[str, float] = {}  # pacing key → monotonic time of its last request
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
        """Retry-After when the API gives one; else exponential backoff, jittered (half to all
        of it) so that several rgt processes do not retry in lockstep."""
        if response is not None and (after := response.headers.get("Retry-After")):
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own backoff
                return min(self.max_backoff_s, max(0.0, float(after)))
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        return delay * random.uniform(0.5, 1.0) if self.jitter else delay

    def _pace(self, path: str) -> None:
        """Wait until every gap the policy puts before a request to `path` has passed."""
        gaps = self.policy.gaps(path)
        now = time.monotonic()
        wait = max((self._last.get(key, -1e18) + gap - now for key, gap in gaps), default=0.0)
        if wait > 0:
            self._sleep(wait)

    def _paced(self, path: str) -> None:
        """Stamp the gaps from when the answer came back, not when the request left: the
        server saw it before then, so the next request cannot reach it too early."""
        now = time.monotonic()
        for key, _ in self.policy.gaps(path):
            self._last[key] = now

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: Any = None, idempotent: bool = True) -> Any:
        """Send one request, retrying 429/5xx and network errors; return the parsed JSON body.

        `idempotent=False` (a create): only what was surely not processed is retried (429, a
        refused connection); anything else raises `AmbiguousCreate` at once."""
        what = f"{method} {path.split('?')[0]}"
        for attempt in range(self.retries + 1):
            response: httpx.Response | None = None
            self._pace(path)
            try:
                response = self._http.request(method, path, params=params, json=json)
            except httpx.TransportError as err:
                self._paced(path)
                reason = self.scrub(f"{type(err).__name__}: {err}")
                if not idempotent and not isinstance(err, httpx.ConnectError):
                    raise AmbiguousCreate(f"{what} to the {self.service} API got no answer "
                                          f"({reason}); it may have been done") from None
                if attempt >= self.retries:
                    raise ApiError(f"cannot reach the {self.service} API at {self.base_url} "
                                   f"({reason}) after {attempt + 1} tries; check the network "
                                   f"and try again") from None
                log.warning("%s: %s; retrying", what, reason)
                self._sleep(self._delay(attempt, None))
                continue
            self._paced(path)
            if 300 <= response.status_code < 400:
                where = self.scrub(response.headers.get("Location") or "nowhere said")
                raise ApiError(f"the {self.service} API answered {what} with a redirect "
                               f"(HTTP {response.status_code} to {where}); rgt does not follow "
                               f"redirects for API calls. Check the API URL ({self.base_url}) "
                               f"or whether the API moved", status=response.status_code,
                               code="redirect")
            if response.status_code in self.key_refused:
                err = self._error(response, what)
                if err.code == "global/account-inactive":
                    raise ApiError(f"your {self.service} account is inactive (HTTP "
                                   f"{response.status_code}, {err.code}): the key is fine, but "
                                   f"the account cannot use the API. Check billing/payment in "
                                   f"the console. ({err})", status=response.status_code,
                                   code=err.code)
                raise UserError(f"{self.key_env} is missing or wrong: the {self.service} API "
                                f"answered {response.status_code} to {what}. Create a key in "
                                f"the console and export it as {self.key_env}")
            if response.status_code in RETRY_STATUS and response.status_code != 429 \
                    and not idempotent:
                raise AmbiguousCreate(f"{what}: the {self.service} API answered HTTP "
                                      f"{response.status_code}; the create may have been done",
                                      status=response.status_code)
            if response.status_code == 429 and _quota_exceeded(response):
                raise self._quota_error(response, what)
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

    def _quota_error(self, response: httpx.Response, what: str) -> ApiError:
        """vast.ai's daily search quota: it resets at UTC midnight (X-RateLimit-Reset), so a
        retry only spends more of it; the official client does not retry it either."""
        err = self._error(response, what)
        try:
            reset = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(
                int(response.headers["X-RateLimit-Reset"])))
        except (KeyError, ValueError, OverflowError):
            reset = "UTC midnight"
        return ApiError(f"{err}. This is the daily search quota, not a passing rate limit: "
                        f"retrying does not help; it resets at {reset}",
                        status=429, code=err.code)

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
                message = str(body.get("msg") or body.get("message")
                              or body.get("detail") or "")
                problems = body.get("errors")  # RFC 9457 (RunPod v2): each failed check
                if isinstance(problems, list) and problems:
                    message += ": " + "; ".join(str(p) for p in problems[:5])
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

    def post(self, path: str, body: Any, *, idempotent: bool = True) -> Any:
        return self.request("POST", path, json=body, idempotent=idempotent)

    def put(self, path: str, body: Any, *, idempotent: bool = True) -> Any:
        return self.request("PUT", path, json=body, idempotent=idempotent)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


def _quota_exceeded(response: httpx.Response) -> bool:
    """A 429 that says `search_quota_exceeded` (vast.ai): a quota, not a rate limit."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == "search_quota_exceeded"


def poll_interval() -> float:
    """Seconds between control-plane polls; `RGT_CLOUD_POLL_S` shortens it (tests, impatience)."""
    try:
        return max(0.01, float(os.environ.get("RGT_CLOUD_POLL_S", "") or 5))
    except ValueError:
        return 5.0


def adopt_lost_create(listed: Callable[[], list[dict[str, Any]]], before: set[Any], *,
                      poll_s: float, looks: int = 5) -> list[dict[str, Any]]:
    """The rows a create whose answer was lost (AmbiguousCreate) made: those `listed` shows
    under the name rgt gave it that were not there `before`. Asked up to `looks` times,
    `poll_s` apart, as a new instance can take a moment to be listed; [] when none appeared.
    The caller adopts one, and names every extra (each bills) — it never creates again."""
    for look in range(looks):
        fresh = [row for row in listed() if row.get("id") not in before]
        if fresh or look + 1 == looks:
            return fresh
        time.sleep(poll_s)
    return []
