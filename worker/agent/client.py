"""The agent's HTTP client for the site: the host key on every call, patience with outages.

A site restart or a proxy's 502 is waited out (the agent retries with backoff up to a
deadline) so that a job goes on and none of its events is lost; a 401 or 403 is final: the
key was revoked or never valid, and the host stops.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx

from worker.rules.protocol import API_ROOT

log = logging.getLogger(__name__)
RETRY_STATUSES = {429, 500, 502, 503, 504}


class KeyRejected(Exception):
    """The site refused the host key (revoked or unknown): the host must stop."""


class SiteUnavailable(Exception):
    """The site did not answer within the call's patience."""


class Refused(Exception):
    """The site answered with a 4xx other than 401/403: this request will never succeed."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


class SiteClient:
    def __init__(self, base_url: str, host_key: str, *, timeout: float = 30.0) -> None:
        self.base = base_url.rstrip("/") + API_ROOT
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {host_key}", "User-Agent": "benchloop-lab-agent"},
            timeout=httpx.Timeout(timeout, connect=5.0),
        )

    def close(self) -> None:
        self._http.close()

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        params: dict | None = None,
        patience: float = 600.0,
        raw: bytes | None = None,
    ) -> Any:
        """POST and return the JSON answer (None for 204), retrying transient failures for up
        to `patience` seconds; raises KeyRejected, Refused or SiteUnavailable."""
        deadline = time.monotonic() + patience
        delay = 0.5
        while True:
            try:
                if raw is not None:
                    headers = {"Content-Type": "application/json"}
                    response = self._http.post(
                        self.base + path, content=raw, params=params, headers=headers
                    )
                else:
                    response = self._http.post(self.base + path, json=body or {}, params=params)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code in (401, 403) and _is_key_problem(response):
                    raise KeyRejected(_message(response))
                if response.status_code not in RETRY_STATUSES:
                    if response.status_code >= 400:
                        raise Refused(response.status_code, _body(response))
                    return None if response.status_code == 204 else response.json()
                problem = f"HTTP {response.status_code}"
                retry_after = response.headers.get("Retry-After", "")
                if retry_after.isdigit():
                    delay = max(delay, min(float(retry_after), 30.0))
            if time.monotonic() + delay > deadline:
                raise SiteUnavailable(f"{path}: {problem}")
            log.warning("site call %s failed (%s); retrying in %.1f s", path, problem, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def _message(response: httpx.Response) -> str:
    body = _body(response)
    if isinstance(body, dict):
        error = body.get("error") or {}
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
    return f"HTTP {response.status_code}"


def _is_key_problem(response: httpx.Response) -> bool:
    """401 always; 403 only when it is about the key itself (a job claimed by another host is
    a 403 about that job, not a reason to stop the host)."""
    if response.status_code == 401:
        return True
    body = _body(response)
    code = body.get("error", {}).get("code") if isinstance(body, dict) else None
    return code in ("forbidden", "permission_denied")
