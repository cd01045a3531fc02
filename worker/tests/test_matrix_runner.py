"""The harness matrix's recording proxy and cage, against the real llama.cpp server and bwrap."""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from worker.engine.matrix import cage
from worker.engine.matrix.programs import PROGRAMS
from worker.engine.matrix.proxy import RecordingProxy
from worker.engine.matrix.runner import find_denials, run_program
from worker.engine.matrix.spec import Endpoint, HarnessTask, Invocation, ProgramResult
from worker.engine.matrix.testing import log_offset, wait_for_server_log
from worker.tests.llm_server import require_harness
from worker.tests.race_server import race_server

PROJECT = Path(__file__).resolve().parents[2]


class PythonProbe:
    """A stand-in adapter: the harness install's own python3 runs ``code`` in the cage."""

    spec = PROGRAMS["mini-swe-agent"]

    def __init__(self, code: str) -> None:
        self.code = textwrap.dedent(code)

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        return Invocation(
            argv=["python3", "-c", self.code, endpoint.base_url],
            env={"PROBE": "1"},
            home_files={"probe/config.txt": "from the adapter"},
        )

    def format_failures(self, result: ProgramResult) -> list[str]:
        return []


def _installed() -> None:
    require_harness(PythonProbe.spec)


TASK = HarnessTask("probe", "probe the cage", ())
STORY = "Write a long story about a dragon who lives in a library."


def _post(client: httpx.Client, path: str, body: dict) -> httpx.Response:
    return client.post(path, json=body, timeout=60)


@pytest.mark.llm
def test_proxy_records_match_the_server_log(llm_server, llm_model):
    offset = log_offset(llm_server.log_path)
    with RecordingProxy(llm_server.base_url, max_tokens_cap=6) as proxy:
        client = httpx.Client(base_url=proxy.tcp_url)
        # ignore_eos (llama.cpp's): the two capped answers run to the cap, which a sampled end
        # of text once cut to 4 tokens in CI.
        plain = _post(
            client,
            "/chat/completions",
            {
                "model": llm_model,
                "messages": [{"role": "user", "content": STORY}],
                "ignore_eos": True,
            },
        )
        chunks: list[bytes] = []
        body = {
            "model": llm_model,
            "messages": [{"role": "user", "content": "Count from one to one hundred."}],
            "stream": True,
            "max_tokens": 50,  # clamped to the cap
            "ignore_eos": True,
        }
        with client.stream("POST", "/chat/completions", json=body, timeout=60) as streamed:
            chunks.extend(streamed.iter_raw())
        completion = _post(
            client, "/completions", {"model": llm_model, "prompt": "1, 2, 3,", "max_tokens": 3}
        )
        models = client.get("/models")
        client.close()
    assert plain.status_code == streamed.status_code == completion.status_code == 200, (
        plain.text,
        completion.text,
    )
    assert models.status_code == 200 and models.json()["data"]
    assert plain.json()["choices"][0]["message"]["content"]
    events = [c for c in b"".join(chunks).split(b"\n\n") if c.startswith(b"data: {")]
    assert len(events) >= 3  # passed on as events, one per token, not one buffered reply
    assert b"data: [DONE]" in b"".join(chunks)

    records = proxy.records
    assert [r.stream for r in records] == [False, True, False]
    assert all(r.status == 200 and r.source == "timings" and not r.error for r in records)
    assert [r.completion_tokens for r in records][:2] == [6, 6]  # the cap, set and clamped
    assert 0 < (records[2].completion_tokens or 0) <= 3  # a smaller budget is left alone
    assert proxy.other_requests == [("GET", "/v1/models", 200)]
    logged = wait_for_server_log(llm_server.log_path, offset, 3)
    assert [e["prompt_tokens"] for e in logged] == [
        r.prompt_tokens - r.cached_tokens for r in records
    ]
    assert [e["completion_tokens"] for e in logged] == [r.completion_tokens for r in records]
    assert all(0 <= r.started_s <= r.ended_s for r in records)
    assert proxy.transcript[0]["messages"] == [{"role": "user", "content": STORY}]


def test_proxy_answers_502_when_the_upstream_is_down():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    with RecordingProxy(f"http://127.0.0.1:{dead}/v1") as proxy:
        reply = httpx.post(
            f"{proxy.tcp_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
            timeout=30,
        )
    assert reply.status_code == 502
    assert "upstream failed" in reply.json()["error"]["message"]
    (record,) = proxy.records
    assert record.status == 502 and "ConnectError" in record.error


def test_proxy_resends_once_when_the_upstream_closed_its_kept_alive_connection():
    """llama.cpp closes a connection after each streamed answer: the proxy's next request on it
    finds it closed before any answer came, and goes again on a new one instead of a 502."""
    listener, connections = race_server()
    try:
        upstream = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        with RecordingProxy(upstream) as proxy:
            replies = [
                httpx.post(f"{proxy.tcp_url}/chat/completions", json=body, timeout=30)
                for _ in range(2)
            ]
        assert [r.status_code for r in replies] == [200, 200]
        assert [r.status for r in proxy.records] == [200, 200]
        assert len(connections) == 2  # the first connection, dropped, and the one it resent on
    finally:
        listener.close()


class _SlowToRecord(RecordingProxy):
    """Holds each relay after the answer went out: its record comes later than the client's
    last byte, as when a loaded machine leaves the relay's thread waiting for a CPU."""

    def _forward(self, *args, **kwargs) -> None:
        super()._forward(*args, **kwargs)
        time.sleep(0.5)


def test_closing_the_proxy_waits_for_the_relay_to_record_its_request():
    """CI once saw our loop's only request missing from the records ("the harness made no model
    request"): the loop had its answer and read the records before the relay wrote them."""
    listener, _ = race_server()
    try:
        upstream = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        with _SlowToRecord(upstream) as proxy:
            reply = httpx.post(f"{proxy.tcp_url}/chat/completions", json=body, timeout=30)
            assert reply.status_code == 200
            closing = time.perf_counter()
        assert [r.status for r in proxy.records] == [200]
        assert 0.3 < time.perf_counter() - closing < 5
    finally:
        listener.close()


WRITES = ("/usr/x-benchloop", "/etc/x-benchloop", "/root/x-benchloop", "/x-benchloop", "/dev/x-bl")
PROBE = """
import json, os, socket, sys, urllib.request
out = {"env": sorted(os.environ), "cwd": os.getcwd(), "errors": {}}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as exc:
        out[name] = "failed"
        print(f"{name}: {exc}", file=sys.stderr)
def write(path):
    with open(path, "w") as handle:
        handle.write("x")
attempt("workspace", lambda: write("/workspace/made-here.txt"))
attempt("home", lambda: write(os.path.expanduser("~/made-in-home.txt")))
attempt("tmp", lambda: write("/tmp/scratch.txt"))
attempt("shm", lambda: write("/dev/shm/scratch"))
for path in WRITES:
    attempt("write " + path, lambda path=path: write(path))
for path in HIDDEN:
    out["sees " + path] = os.path.exists(path)
out["home_file"] = open(os.path.expanduser("~/probe/config.txt")).read()
def connect(host, port):
    with socket.create_connection((host, port), timeout=5):
        pass
attempt("connect server port", lambda: connect("127.0.0.1", SERVER_PORT))
attempt("connect outside", lambda: connect("1.1.1.1", 80))
attempt("resolve", lambda: socket.getaddrinfo("example.com", 80))
with urllib.request.urlopen(sys.argv[1] + "/models", timeout=30) as reply:
    out["models"] = json.load(reply)["data"][0]["id"]
print(json.dumps(out))
"""


@pytest.mark.llm
def test_cage_allows_only_the_workspace_home_and_endpoint(tmp_path, llm_server, llm_model):
    _installed()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    secret = tmp_path / "host-secret.txt"
    secret.write_text("x")
    # Host paths the cage must not show: the project, a host file, another harness's install
    # (a sibling of the one bound in), and ~/.cache unless the install itself lives there.
    install = str(cage.install_dir(PythonProbe.spec))
    hidden = ["/work/main", "/work/notes", str(PROJECT), str(secret)]
    hidden += [str(cage.harness_prefix(PROGRAMS["aider"]))]
    if not install.startswith(str(Path.home() / ".cache") + "/"):
        hidden.append(str(Path.home() / ".cache"))
    code = PROBE.replace("HIDDEN", repr(hidden)).replace("WRITES", repr(WRITES))
    code = code.replace("SERVER_PORT", str(llm_server.port))
    result = run_program(
        PythonProbe(code),
        TASK,
        workspace,
        llm_server.base_url,
        llm_model,
        max_tokens_cap=8,
        timeout_s=60,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["cwd"] == cage.WORKSPACE
    assert seen["workspace"] == seen["home"] == seen["tmp"] == seen["shm"] == "ok"
    assert (workspace / "made-here.txt").read_text() == "x"
    assert result.home_files["made-in-home.txt"] == "x"
    assert seen["home_file"] == "from the adapter"
    for path in WRITES:
        assert seen[f"write {path}"] == "failed"
        assert not os.path.exists(path)
    for path in hidden:
        assert seen[f"sees {path}"] is False, path
    assert seen["connect server port"] == seen["connect outside"] == seen["resolve"] == "failed"
    assert seen["models"]  # the endpoint, through the forwarder and the proxy
    assert {"HOME", "PATH", "LANG", "PROBE"} <= set(seen["env"])  # the adapter's, and ours
    assert set(seen["env"]) <= {"HOME", "PATH", "LANG", "PROBE", "PWD", "LC_CTYPE"}  # only
    assert result.requests == []  # /v1/models is no model request
    text = "\n".join(result.denials)
    assert "write outside the workspace blocked: write /etc/x-benchloop" in text
    assert "network blocked: connect server port: [Errno 111] Connection refused" in text
    assert "network blocked: connect outside: [Errno 101] Network is unreachable" in text


SPAWNER = """
import subprocess, sys, time
for _ in range(3):
    subprocess.Popen(["sleep", "MARK"], start_new_session=True)
print("spawned", flush=True)
time.sleep(600)
"""


def _host_processes_with(arg: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                parts = handle.read().split(b"\0")
        except OSError:
            continue
        if arg.encode() in parts:
            found.append(int(entry))
    return found


def test_cage_timeout_kills_the_whole_process_tree(tmp_path):
    _installed()
    mark = f"{900 + uuid.uuid4().int % 99}.{uuid.uuid4().int % 10**6}"  # a unique sleep length
    found: list[int] = []

    def watch() -> None:  # while the program runs, its sleeps are visible from the host
        for _ in range(100):
            if pids := _host_processes_with(mark):
                found.extend(pids)
                if len(found) >= 3:
                    return
                found.clear()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = run_program(
        PythonProbe(SPAWNER.replace("MARK", mark)),
        TASK,
        tmp_path,
        "http://127.0.0.1:9/v1",
        "m",
        max_tokens_cap=8,
        timeout_s=4,
    )
    watcher.join()
    assert result.timed_out
    assert "spawned" in result.stdout
    assert len(found) == 3  # they did run (in their own sessions, out of the program's group)
    assert _host_processes_with(mark) == []  # and died with the namespace


def test_denials_come_from_fed_back_outputs_not_the_models_words():
    transcript = [
        {
            "messages": [
                {"role": "system", "content": "Never say Network is unreachable."},
                {"role": "assistant", "content": "I will write to /etc/x: Read-only file system"},
                {"role": "user", "content": "<output>\ncurl: (6) Could not resolve host: a.b\n"},
                {
                    "role": "tool",
                    "content": '{"output": "sh: 1: cannot create /etc/x: '
                    'Read-only file system\\nsh: /proc/sys/x: Permission denied"}',
                },
                {"role": "tool", "content": "open /workspace/a: Permission denied"},
            ]
        }
    ]
    stdout = "I will write to /etc/x: Read-only file system\n"  # the model's words, echoed
    denials = find_denials(stdout, "", transcript)
    assert denials == [
        "network blocked: curl: (6) Could not resolve host: a.b",
        'write outside the workspace blocked: {"output": "sh: 1: cannot create /etc/x: '
        "Read-only file system",
        'access outside the workspace blocked: sh: /proc/sys/x: Permission denied"}',
    ]
