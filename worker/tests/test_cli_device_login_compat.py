"""`benchloop login` polls sites of both kinds for one release (issue 31, defect 12): a site
that speaks RFC 8628 (400 with {"error": "authorization_pending" | "slow_down" | …}, 200 with
access_token) and a site before it (428 pending, 429 slow_down, the code nested as
{"error": {"code": …}}, 200 with api_key). The current site's answers are tested against the
real site (submissions/tests/test_cli_site.py); a site of the release before runs nowhere
here, so this HTTP server answers exactly as it did, and also as the new one does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from worker.engine.errors import AuthError
from worker.engine.site import DEVICE_GRANT_TYPE, DeviceGrant, device_poll

PENDING, SLOW_DOWN, DENIED = "authorization_pending", "slow_down", "access_denied"


def _answer(kind: str, step: str) -> tuple[int, dict]:
    """What a site of `kind` ("rfc8628" or "before") answers for `step`."""
    if step == "key":
        if kind == "rfc8628":
            return 200, {
                "access_token": "bl_new_key",
                "token_type": "Bearer",
                "api_key": "bl_new_key",
            }
        return 200, {"api_key": "bl_old_key", "scopes": ["read", "submit"]}
    if kind == "rfc8628":
        return 400, {"error": step, "error_description": f"({step})"}
    status = {PENDING: 428, SLOW_DOWN: 429}.get(step, 400)
    return status, {"error": {"code": step, "message": f"the site says {step}"}}


@pytest.fixture
def site() -> Iterator[tuple[str, list[str], list[dict]]]:
    """A site whose next answers are the steps the test puts in its script; what the CLI
    sent is kept."""
    script: list[str] = []
    sent: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server name)
            length = int(self.headers.get("Content-Length") or 0)
            sent.append(
                {
                    "path": self.path,
                    "type": self.headers.get("Content-Type"),
                    "body": json.loads(self.rfile.read(length) or b"{}"),
                }
            )
            kind, step = script.pop(0).split(":")
            status, body = _answer(kind, step)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script, sent
    finally:
        server.shutdown()
        server.server_close()


GRANT = DeviceGrant(
    device_code="dev-code", user_code="ABCD-EFGH", verification_uri="x", interval=5, expires_in=60
)


@pytest.mark.parametrize(("kind", "key"), [("rfc8628", "bl_new_key"), ("before", "bl_old_key")])
def test_login_polls_through_pending_and_slow_down_on_either_kind_of_site(site, kind, key):
    url, script, sent = site
    script += [f"{kind}:{PENDING}", f"{kind}:{SLOW_DOWN}", f"{kind}:{PENDING}", f"{kind}:key"]
    waits: list[float] = []
    assert device_poll(url, GRANT, sleep=waits.append) == key
    assert waits == [5, 5, 10, 10]  # slow_down adds 5 s, as RFC 8628 says
    assert not script
    # JSON, which a site of either kind reads, naming RFC 8628's grant type.
    for request in sent:
        assert request["type"] == "application/json"
        assert request["body"] == {"grant_type": DEVICE_GRANT_TYPE, "device_code": "dev-code"}


@pytest.mark.parametrize("kind", ["rfc8628", "before"])
@pytest.mark.parametrize("step", [DENIED, "expired_token"])
def test_a_denied_or_expired_login_ends_with_the_sites_words(site, kind, step):
    url, script, _sent = site
    script += [f"{kind}:{PENDING}", f"{kind}:{step}"]
    with pytest.raises(AuthError) as refused:
        device_poll(url, GRANT, sleep=lambda _s: None)
    assert str(refused.value).startswith("login not completed: ") and step in str(refused.value)
    assert not script
