"""A job attempt keeps its files in its own folder under var/lab-jobs, removed when it ends;
a managed server's log is written there, never to /tmp."""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from lab import services
from lab.models import BenchmarkJob
from worker.agent import jobs

pytestmark = pytest.mark.django_db(transaction=True)

# Stands in for llama-server: answers /health on the --port it is given and logs a line.
FAKE_SERVER = textwrap.dedent(
    """\
    #!{python}
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port = int(sys.argv[sys.argv.index("--port") + 1])
    print("fake llama-server listening on", port, flush=True)
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{{}}")
        def log_message(self, *args):
            pass
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


@pytest.fixture
def var_dir(tmp_path) -> Path:
    return tmp_path / "var"


def _run(agent_for, job, var_dir: Path) -> str:
    """The agent's job step, against the in-process site, as host lab-cpu."""
    client = agent_for("lab-cpu")
    return jobs.run_job(client, job.pk, jobs_root=var_dir / "lab-jobs", heartbeat=1)


def _tmp_logs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("llama-server-*.log")}


def test_an_endpoint_jobs_folder_is_removed_when_it_ends(
    var_dir, operator, lab_hosts, agent_for, monkeypatch
) -> None:
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="cpu"
    )
    seen = {}

    def engine(state, url, api_key, server=None):
        seen["folder"] = state.folder
        (state.folder / "home" / "runs" / "r1").mkdir(parents=True)
        (state.folder / "home" / "runs" / "r1" / "run.json").write_text("{}")
        return "succeeded"

    monkeypatch.setattr(jobs, "_run_engine", engine)
    assert _run(agent_for, job, var_dir) == "succeeded"
    assert seen["folder"].parent == var_dir / "lab-jobs"
    assert seen["folder"].name.startswith(f"job-{job.pk}-attempt-1-")
    assert list((var_dir / "lab-jobs").iterdir()) == []


def test_a_failing_job_leaves_nothing_behind_either(
    var_dir, operator, lab_hosts, agent_for, monkeypatch
):
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="cpu"
    )

    def engine(state, url, api_key, server=None):
        (state.folder / "partial.txt").write_text("half a run")
        raise RuntimeError("the disk vanished")

    monkeypatch.setattr(jobs, "_run_engine", engine)
    assert _run(agent_for, job, var_dir).startswith("failed: RuntimeError")
    assert BenchmarkJob.objects.get(pk=job.pk).status == "failed"
    assert list((var_dir / "lab-jobs").iterdir()) == []


@pytest.mark.parametrize("crash", [False, True])
def test_a_managed_servers_log_is_in_the_jobs_folder_and_goes_with_it(
    crash, var_dir, tmp_path, operator, lab_hosts, agent_for, monkeypatch
) -> None:
    binary = tmp_path / "fake-llama-server"
    binary.write_text(FAKE_SERVER.format(python=sys.executable))
    binary.chmod(0o755)
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF")
    job = services.queue_job(
        requested_by=operator,
        target="managed",
        model="fake",
        binary=str(binary),
        model_path=str(weights),
        pool="cpu",
    )
    before = _tmp_logs()
    seen = {}

    def engine(state, url, api_key, server=None):
        seen["log"] = server.log_path
        seen["text"] = server.log_path.read_text()
        if crash:
            server.process.kill()
            server.process.wait()
        jobs._stop_server(server, state)  # as the real engine step does before finishing
        return "succeeded"

    monkeypatch.setattr(jobs, "_run_engine", engine)
    assert _run(agent_for, job, var_dir) == "succeeded"
    assert seen["log"].parent.parent == var_dir / "lab-jobs"
    assert seen["log"].name == "llama-server.log" and "fake llama-server" in seen["text"]
    assert list((var_dir / "lab-jobs").iterdir()) == []
    assert _tmp_logs() == before  # nothing new in /tmp
    messages = [e.payload.get("message") for e in job.events.filter(kind="log")]
    if crash:  # its log is gone with the folder: its last lines are kept as an event
        assert messages[-1].startswith("the managed llama.cpp server exited with code -9:\n")
        assert "fake llama-server listening" in messages[-1]
    else:
        assert messages[-1] == "stopped the managed llama.cpp server"
    assert sum("managed llama.cpp server" in m and "healthy" not in m for m in messages) == 1
