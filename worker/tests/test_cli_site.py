"""`submit` and `login` against a real local HTTP server speaking the site's device/upload API."""

from __future__ import annotations

import json
import shutil
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from worker.cli import main
from worker.engine.site import DeviceGrant, device_poll
from worker.engine.testing.xllama_launcher import free_port

from .test_engine_bundle import FIXTURES, needs_fixtures

KEY = "bl_test_0123456789"


class SiteState:
    def __init__(self) -> None:
        self.runs: dict[str, dict] = {}
        self.requests: list[tuple[str, dict, dict]] = []
        self.token_replies: list[tuple[int, dict]] = []


def _handler(state: SiteState):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            state.requests.append((self.path, dict(self.headers), body))
            if self.path == "/api/v1/runs":
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self._reply(401, {"error": "invalid API key"})
                run_id = body["client_run_id"]
                known = run_id in state.runs
                state.runs[run_id] = body
                return self._reply(200 if known else 201, {"url": f"/runs/{run_id}"})
            if self.path == "/api/v1/device/start":
                port = self.server.server_address[1]
                return self._reply(
                    200,
                    {
                        "device_code": "dev-123",
                        "user_code": "WXYZ-1234",
                        "verification_uri": f"http://127.0.0.1:{port}/device",
                        "interval": 0.1,
                        "expires_in": 30,
                    },
                )
            if self.path == "/api/v1/device/token":
                code, reply = state.token_replies.pop(0)
                return self._reply(code, reply)
            return self._reply(404, {"error": "not found"})

    return Handler


@pytest.fixture
def site():
    state = SiteState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.llm
def test_submit_sends_the_upload_view_and_is_idempotent(llm_url, bench_home, site, capsys):
    assert (
        main(
            [
                "run",
                "--url",
                llm_url,
                "--tasks",
                "speed-p128-short",
                "--trials",
                "1",
                "--max-tokens",
                "8",
                "--json",
            ]
        )
        == 0
    )
    run = json.loads(capsys.readouterr().out)
    args = ["submit", "--site", site.url, "--json"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLOOP_API_KEY", KEY)
        assert main(args) == 0
        first = json.loads(capsys.readouterr().out)
        assert main([*args[:1], run["run_id"], *args[1:]]) == 0
        second = json.loads(capsys.readouterr().out)
    assert first["created"] is True and first["status_code"] == 201
    assert second["created"] is False and second["status_code"] == 200
    posts = [r for r in site.requests if r[0] == "/api/v1/runs"]
    assert len(posts) == 2
    (path, headers, body), (_, _, body_again) = posts
    assert body["client_run_id"] == body_again["client_run_id"] == run["client_run_id"]
    assert headers["Idempotency-Key"] == run["client_run_id"]
    text = json.dumps(body)
    assert llm_url not in text and llm_url.split("//")[1] not in text and KEY not in text
    assert "endpoint" not in body["machine"]
    assert body["suites"]["speed"]["tasks"][0]["metadata"]["trials"][0]["timings"]["chunk_ms"]
    record = json.loads((Path(run["path"]).parent / "submission.json").read_text())
    assert record["client_run_id"] == run["client_run_id"]


@needs_fixtures
def test_submit_without_a_key_or_site_fails_with_clear_exit_codes(bench_home, site, capsys):
    target = bench_home / "runs" / "20260512-125752-qwen3-8b-local-ollama"
    target.mkdir(parents=True)
    shutil.copy(FIXTURES / "generated/v2-0.2.3-local/run.json", target / "run.json")
    assert main(["submit"]) == 2  # no site anywhere
    assert main(["submit", "--site", site.url]) == 4  # no key
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLOOP_API_KEY", "bl_wrong")
        assert main(["submit", "--site", site.url]) == 4  # key refused (401)
        assert main(["submit", "--site", f"http://127.0.0.1:{free_port()}"]) == 3
        mp.setenv("BENCHLOOP_API_KEY", KEY)
        assert main(["submit", "--site", site.url, "--json"]) == 0
    body = site.runs[next(iter(site.runs))]
    assert "machine_id" not in body["machine"]  # legacy MAC-derived id is not sent
    assert "localhost:11434" not in json.dumps(body)
    assert "Traceback" not in capsys.readouterr().err


def test_login_polls_until_approved_and_saves_the_key_privately(bench_home, site, capsys):
    site.token_replies = [(428, {"error": "authorization_pending"}), (200, {"api_key": KEY})]
    assert main(["login", "--site", site.url, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    creds = Path(out["credentials"])
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    assert json.loads(creds.read_text())["api_key"] == KEY
    polls = [r for r in site.requests if r[0] == "/api/v1/device/token"]
    assert [p[2] for p in polls] == [{"device_code": "dev-123"}] * 2
    # The saved login now supplies both the site and the key.
    from worker.engine.site import api_key_for, site_url

    assert site_url(None) == site.url
    assert api_key_for(site.url) == KEY


def test_login_reports_an_expired_code(bench_home, site, capsys):
    site.token_replies = [(400, {"error": "expired_token"})]
    assert main(["login", "--site", site.url]) == 4
    assert "expired_token" in capsys.readouterr().err
    assert not (bench_home / "credentials.json").exists()


def test_slow_down_lengthens_the_polling_interval(site):
    site.token_replies = [
        (429, {"error": "slow_down"}),
        (428, {"error": "authorization_pending"}),
        (200, {"api_key": KEY}),
    ]
    waits: list[float] = []
    grant = DeviceGrant("dev-123", "WXYZ-1234", site.url + "/device", 1.0, 60.0)
    assert device_poll(site.url, grant, sleep=waits.append) == KEY
    assert waits == [1.0, 6.0, 6.0]
