"""Talking to a BenchLoop site: idempotent run upload and the device-authorisation login."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from .errors import AuthError, EngineError, RequestRejected, ServerError, UsageError
from .paths import credentials_path
from .transport import USER_AGENT, error_message, map_transport_error

RUNS_PATH = "/api/v1/runs"
DEVICE_START_PATH = "/api/v1/device/start"
DEVICE_TOKEN_PATH = "/api/v1/device/token"
# RFC 8628 section 3.4: the grant type of a device access token request.
DEVICE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"


def site_url(explicit: str | None) -> str:
    """--site, else $BENCHLOOP_SITE, else the site of the saved login."""
    site = explicit or os.environ.get("BENCHLOOP_SITE", "").strip()
    if not site:
        site = load_credentials().get("site", "")
    if not site:
        raise UsageError(
            "no BenchLoop site given", hint="Pass --site https://… or set $BENCHLOOP_SITE."
        )
    if "://" not in site:
        site = "https://" + site
    return site.rstrip("/")


def load_credentials(path: Path | None = None) -> dict:
    path = path or credentials_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_credentials(site: str, api_key: str, path: Path | None = None) -> Path:
    """Store the key readable by this user only (0600), replacing any earlier login."""
    path = path or credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(
            {"site": site, "api_key": api_key, "saved_at": datetime.now(UTC).isoformat()}, handle
        )
        handle.write("\n")
    os.chmod(tmp, 0o600)  # in case the file pre-existed with looser bits
    os.replace(tmp, path)
    return path


def api_key_for(site: str) -> str:
    """$BENCHLOOP_API_KEY, else the saved login for this site."""
    key = os.environ.get("BENCHLOOP_API_KEY", "").strip()
    if key:
        return key
    saved = load_credentials()
    if saved.get("api_key") and saved.get("site", "").rstrip("/") == site:
        return saved["api_key"]
    raise AuthError(
        f"no API key for {site}", hint="Run `benchloop login --site …` or set $BENCHLOOP_API_KEY."
    )


def _client(timeout: float) -> httpx.Client:
    return httpx.Client(
        timeout=timeout, headers={"User-Agent": USER_AGENT, "Accept": "application/json"}
    )


def _raise_site_error(response: httpx.Response) -> None:
    message = f"site answered HTTP {response.status_code}: {error_message(response)}"
    if response.status_code in (401, 403):
        raise AuthError(message, hint="The key was refused; run `benchloop login` again.")
    if response.status_code >= 500:
        raise ServerError(message, hint="The site failed; try again later.")
    raise RequestRejected(message)


@dataclass
class SubmitResult:
    status_code: int
    created: bool
    body: dict


def submit(site: str, api_key: str, payload: dict, *, timeout: float = 30.0) -> SubmitResult:
    """POST the upload view; 201 = stored now, 200 = the site already had this client_run_id."""
    headers = {
        "Authorization": f"Bearer {api_key}",
        "Idempotency-Key": str(payload.get("client_run_id", "")),
    }
    try:
        with _client(timeout) as client:
            response = client.post(site + RUNS_PATH, json=payload, headers=headers)
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    if response.status_code not in (200, 201):
        _raise_site_error(response)
    try:
        body = response.json()
    except ValueError:
        body = {}
    return SubmitResult(
        response.status_code, response.status_code == 201, body if isinstance(body, dict) else {}
    )


@dataclass
class DeviceGrant:
    device_code: str
    user_code: str
    verification_uri: str
    interval: float
    expires_in: float
    verification_uri_complete: str = ""


def device_start(site: str, *, timeout: float = 30.0) -> DeviceGrant:
    try:
        with _client(timeout) as client:
            response = client.post(site + DEVICE_START_PATH, json={"client": USER_AGENT})
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    if response.status_code not in (200, 201):
        _raise_site_error(response)
    try:
        data = response.json()
        return DeviceGrant(
            device_code=data["device_code"],
            user_code=data["user_code"],
            verification_uri=data["verification_uri"],
            interval=float(data.get("interval", 5)),
            expires_in=float(data.get("expires_in", 600)),
            verification_uri_complete=data.get("verification_uri_complete", ""),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise EngineError("the site's device/start answer is missing fields") from exc


def device_poll(
    site: str,
    grant: DeviceGrant,
    *,
    sleep: Callable[[float], None] = time.sleep,
    timeout: float = 30.0,
) -> str:
    """Poll until the user approves; return the API key.

    RFC 8628's answers: 400 with ``{"error": "authorization_pending"}`` (not approved yet) or
    ``slow_down`` (the interval grows by 5 s); ``access_denied`` and ``expired_token`` end
    it; 200 carries ``access_token``. Sites before it answered 428 for pending and 429 for
    slow_down, with the code nested (``{"error": {"code": …}}``), and 200 with ``api_key``:
    both are understood, for one release. The poll is JSON, which both kinds of site read.
    """
    interval = max(grant.interval, 0.1)
    deadline = time.monotonic() + grant.expires_in
    body = {"grant_type": DEVICE_GRANT_TYPE, "device_code": grant.device_code}
    with _client(timeout) as client:
        while time.monotonic() < deadline:
            sleep(interval)
            try:
                response = client.post(site + DEVICE_TOKEN_PATH, json=body)
            except httpx.HTTPError as exc:
                raise map_transport_error(exc) from exc
            if response.status_code == 200:
                return _granted_key(response)
            code = _device_error(response)
            if code == "authorization_pending" or response.status_code == 428:
                continue
            if code == "slow_down" or response.status_code == 429:  # (or a rate limit)
                interval += 5
                continue
            if response.status_code == 400:
                raise AuthError(
                    f"login not completed: {_device_error_words(response, code)}",
                    hint="Run `benchloop login` again.",
                )
            _raise_site_error(response)
    raise AuthError(
        "login code expired before it was approved", hint="Run `benchloop login` again."
    )


def _granted_key(response: httpx.Response) -> str:
    try:
        body = response.json()
        key = body.get("access_token") or body["api_key"]
    except (ValueError, KeyError, AttributeError) as exc:
        raise EngineError("the site approved the login but sent no access token") from exc
    return str(key)


def _device_error(response: httpx.Response) -> str:
    """The poll's error code: RFC 8628's ``{"error": "slow_down"}``, or an older site's
    ``{"error": {"code": "slow_down"}}``; "" when the body has none."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    if isinstance(error, dict):
        error = error.get("code")
    return error if isinstance(error, str) else ""


def _device_error_words(response: httpx.Response, code: str) -> str:
    try:
        description = response.json().get("error_description")
    except (ValueError, AttributeError):
        description = None
    if isinstance(description, str) and description:
        return f"{description} ({code})" if code else description
    return error_message(response)


def run_state(site: str, api_key: str, run_id: int, *, timeout: float = 5.0) -> dict | None:
    """Where one of our uploads stands now (``{status, published, url}``), None when the site no
    longer has it (deleted, or it never was ours): GET /api/v1/runs/<id>/state, owner only."""
    headers = {"Authorization": f"Bearer {api_key}"}
    return _get_run_document(site, run_id, "state", headers, "status", str, timeout)


def run_standing(
    site: str, api_key: str | None, run_id: int, *, timeout: float = 10.0
) -> dict | None:
    """Where a run stands among its class (``{sentences, lane, similar, …}``), None when the site
    shows it to nobody asking with this key (missing, or unpublished and not ours):
    GET /api/v1/runs/<id>/standing, public once published, else owner only."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return _get_run_document(site, run_id, "standing", headers, "sentences", list, timeout)


def _get_run_document(
    site: str, run_id: int, name: str, headers: dict, key: str, kind: type, timeout: float
) -> dict | None:
    """GET /api/v1/runs/<id>/<name>: the JSON object, None on 404; `key` must hold a `kind`."""
    try:
        with _client(timeout) as client:
            response = client.get(f"{site}{RUNS_PATH}/{run_id}/{name}", headers=headers)
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        _raise_site_error(response)
    try:
        body = response.json()
    except ValueError as exc:
        raise ServerError(f"the site's run {name} is not JSON") from exc
    if not isinstance(body, dict) or not isinstance(body.get(key), kind):
        raise ServerError(f"the site's run {name} has no {key}")
    return body
