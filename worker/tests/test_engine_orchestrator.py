"""The run orchestrator against real servers: events, crash mid-stream, privacy of uploads."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psutil
import pytest

from worker.engine.bundle import load_bundle, upload_view, validation_errors
from worker.engine.errors import UsageError
from worker.engine.orchestrator import prepare_run, run_benchmark
from worker.engine.plan import RunConfig
from worker.engine.testing.xllama_launcher import start_server

SPEC_EVENTS = {"run_started", "suite_started", "task_completed", "suite_completed", "run_completed"}


@pytest.mark.llm
def test_a_server_killed_mid_stream_fails_that_task_and_the_run_goes_on(
    spawn_llm_server, bench_home, tmp_path
):
    server = spawn_llm_server()
    port = server.port
    events: list[dict] = []
    state = {"killed": False}

    def on_event(event: dict) -> None:
        events.append(event)
        if event["type"] == "task_progress" and not state["killed"]:
            state["killed"] = event["task_id"]
            server.kill()  # SIGKILL while tokens are streaming
            # Bring a fresh server up on the same port before the next task starts.
            spawn_llm_server(port=port, log_dir=tmp_path)

    outcome = run_benchmark(
        RunConfig(
            url=server.base_url,
            tasks=["speed-p512-n16", "speed-p128-n256"],
            trials=1,
            max_tokens=64,
            home=bench_home,
        ),
        on_event=on_event,
    )
    bundle = outcome.bundle
    assert outcome.status == "complete"
    tasks = {t["task_id"]: t for t in bundle["suites"]["speed"]["tasks"]}
    assert list(tasks) == ["speed-p128-n256", "speed-p512-n16"]  # data-file order
    broken = tasks[state["killed"]]
    assert broken["task_id"] == "speed-p128-n256"
    after = tasks["speed-p512-n16"]
    assert broken["execution_ok"] is False and broken["passed"] is False
    assert broken["metadata"]["trials"][0]["error_kind"] == "stream_interrupted"
    assert "dropped" in broken["error"]
    assert after["execution_ok"] is True and after["passed"] is True
    # Reliability is the share of tasks that executed (scoring.aggregate): one of two. A
    # speed-only run has no quality and so no overall score for it to enter (issue 15).
    assert bundle["reliability_score"] == 50.0
    assert bundle["overall_score"] is None and bundle["quality_score"] is None
    # The broken task errored on the endpoint: it is scored (0), so it leaves coverage whole.
    assert bundle["comparability"]["tasks_scored"] == 2
    assert validation_errors(bundle) == []
    assert json.loads(outcome.path.read_text())["status"] == "complete"
    names = [e["type"] for e in events]
    assert set(names) >= SPEC_EVENTS
    assert names[0] == "run_started" and names[-1] == "run_completed"
    completed = [e for e in events if e["type"] == "task_completed"]
    assert [e["completed_tasks"] for e in completed] == [1, 2]
    assert completed[0]["error"]
    assert events[-1]["status"] == "complete" and events[-1]["reliability_score"] == 50.0


@pytest.mark.llm
def test_nothing_identifying_leaks_into_the_upload_view(spawn_llm_server, bench_home):
    key = "sk-leakcheck-" + uuid.uuid4().hex
    server = spawn_llm_server(api_key=key)
    outcome = run_benchmark(
        RunConfig(
            url=f"http://127.0.0.1:{server.port}/v1",
            api_key=key,
            tasks=["speed-p128-n256"],
            trials=1,
            max_tokens=8,
            home=bench_home,
        )
    )
    assert outcome.status == "complete"
    stored = outcome.path.read_text()
    assert key not in stored  # the key is never written, not even locally
    view = upload_view(load_bundle(outcome.path), secrets=[key])
    text = json.dumps(view)
    for needle in (key, server.base_url, f"127.0.0.1:{server.port}", f":{server.port}"):
        assert needle not in text
    macs = {
        addr.address.lower()
        for addrs in psutil.net_if_addrs().values()
        for addr in addrs
        if addr.family == psutil.AF_LINK and addr.address and addr.address != "00:00:00:00:00:00"
    }
    assert not any(mac in text.lower() for mac in macs)
    assert all(mac not in stored.lower() for mac in macs)
    machine = view["machine"]
    assert "endpoint" not in machine and "remote_host" not in machine
    assert machine["machine_id"].startswith("sha256:")
    assert "machine-salt" not in text
    salt = (Path(bench_home) / "machine-salt").read_text().strip()
    assert salt not in stored
    assert all("output" not in t for t in view["suites"]["speed"]["tasks"])
    # What the site needs is still there: every sample with its raw timings.
    trial = view["suites"]["speed"]["tasks"][0]["metadata"]["trials"][0]
    assert trial["timings"]["chunk_ms"]
    assert view["client_run_id"] == outcome.bundle["client_run_id"]


def test_unknown_suites_and_profiles_are_usage_errors_before_any_request(bench_home):
    with pytest.raises(UsageError):
        prepare_run(RunConfig(url="http://127.0.0.1:9", suites=["no-such-suite"], home=bench_home))
    with pytest.raises(UsageError):
        prepare_run(RunConfig(url="http://127.0.0.1:9", profile="nope", home=bench_home))
    with pytest.raises(UsageError):
        prepare_run(RunConfig(url="http://127.0.0.1:9", tasks=["zzz*"], home=bench_home))


def test_the_launcher_refuses_to_wait_forever_for_a_broken_server(tmp_path):
    with pytest.raises((RuntimeError, TimeoutError)):
        start_server(n_ctx=-5, log_dir=tmp_path, timeout=20)


@pytest.mark.llm
def test_forcing_remote_scoring_uses_the_cloud_curve(llm_url, bench_home):
    from worker.rules.scoring import cloud_speed_score

    outcome = run_benchmark(
        RunConfig(
            url=llm_url,
            tasks=["speed-p128-n256"],
            trials=1,
            max_tokens=8,
            scoring="remote",
            home=bench_home,
        )
    )
    bundle = outcome.bundle
    assert bundle["scoring_mode"] == "remote" and bundle["is_remote"] is True
    assert "-remote-" in bundle["run_id"]
    task = bundle["suites"]["speed"]["tasks"][0]
    medians = task["metadata"]["speed_metrics"]
    expected = cloud_speed_score(medians["ttft_ms"], medians["generation_tok_per_sec"])
    assert task["score"] == expected
    assert task["metadata"]["speed_mode"] == "remote"
    # Forcing the scoring mode does not change whose hardware this is.
    assert bundle["hardware"]["attributed"] is True and bundle["machine"]["is_remote"] is False


@pytest.mark.llm
def test_should_stop_ends_the_run_at_a_trial_boundary_keeping_finished_tasks(llm_url, bench_home):
    from worker.engine.orchestrator import execute

    calls = {"n": 0}

    def should_stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 3  # task 1 + its 2 trials pass, then stop before the next task

    prep = prepare_run(
        RunConfig(
            url=llm_url,
            tasks=["speed-p128-*", "speed-p512-*"],
            trials=2,
            max_tokens=8,
            home=bench_home,
        )
    )
    try:
        outcome = execute(prep, should_stop=should_stop)
    finally:
        prep.provider.close()
    assert outcome.status == "cancelled"
    bundle = json.loads(outcome.path.read_text())
    assert bundle["status"] == "incomplete" and bundle["error"]["kind"] == "cancelled"
    assert [t["task_id"] for t in bundle["suites"]["speed"]["tasks"]] == ["speed-p128-n256"]
    assert validation_errors(bundle) == []
