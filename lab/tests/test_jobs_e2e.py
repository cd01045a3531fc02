"""The lab queue end to end: HTTP, Redis, real Celery workers, Postgres and a real llama.cpp."""

from __future__ import annotations

import pytest
from django.test import Client

from lab import services
from lab.models import BenchmarkJob, JobEvent, WorkerHost
from lab.tests.lab import approve, finished, queue_over_http, smollm_gguf, start_worker, wait_for
from runs.models import Run
from runs.services import refresh_stack_stats
from worker.engine.testing.xllama_launcher import NATIVE_SERVER_FLAGS

pytestmark = [pytest.mark.llm, pytest.mark.django_db(transaction=True)]
SMOKE_SAMPLE = ["speed-p128-n256", "tc-01", "rm-01"]
MILESTONES = {"run_started", "suite_started", "task_completed", "suite_completed", "run_completed"}
SUITE = ["suite_started", "task_completed", "suite_completed"]
SMOKE_ORDER = ["run_started", *SUITE, *SUITE, *SUITE, "run_completed"]


def test_an_endpoint_job_runs_on_a_real_worker_and_publishes_a_verified_run(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model
) -> None:
    worker = start_worker(tmp_path, "lab-a", ["cpu.test"], servers=[llm_url], site=lab_site)
    try:
        host = approve("lab-a")
        # The smoke profile, one task from each of its suites (the whole profile takes ~15 min
        # of CPU for SmolLM2 here; `benchloop run --profile smoke` covers all 33 tasks).
        job_id = queue_over_http(
            alice_key,
            endpoint_url=llm_url,
            model=llm_model,
            suites=[],
            profile="smoke",
            tasks=SMOKE_SAMPLE,
            max_tokens=48,
            thinking_budget=16,
        )
        job = wait_for(lambda: finished(job_id), 300, "the job to finish")
        assert job.status == "succeeded", (job.error, worker.log()[-3000:])
    finally:
        worker.stop()
    events = list(JobEvent.objects.filter(job_id=job_id, attempt=1).order_by("seq"))
    milestones = [e.kind for e in events if e.kind in MILESTONES]
    assert milestones == SMOKE_ORDER
    assert [e.payload["suite"] for e in events if e.kind == "suite_started"] == [
        "speed",
        "toolcall",
        "reasonmath",
    ]
    seqs = list(JobEvent.objects.filter(job_id=job_id).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert job.host == host and job.attempts == 1
    assert (job.completed_tasks, job.total_tasks) == (3, 3)
    run = Run.objects.get(pk=job.run_id)
    # Verified unless the lab host was busy with other work while it measured (issue 15):
    # on a shared test machine it often is, and the run says so.
    assert run.contention_status in ("clear", "contended", "unknown")
    assert run.is_verified == (run.contention_status != "contended") and run.published
    assert run.submission.channel == "lab" and run.submission.status == "approved"
    assert run.hardware is not None  # the lab host's own hardware
    # The job's thinking budget reached the engine as `--thinking-budget` would.
    settings = run.raw_payload["settings"]
    assert (settings["thinking_budget"], settings["thinking_budget_source"]) == (16, "option")
    host.refresh_from_db()
    assert host.hardware_info["cpu_model"] and host.hardware.ram_gb
    assert host.inventory[0]["models"] == [llm_model]
    refresh_stack_stats(stack_ids=[run.stack_id])
    verified = "&verified=1" if run.is_verified else ""
    # Ranked on the lab host's own hardware class, with its speeds (issue 15).
    lane = f"hw={run.hardware_class.slug}&scale=v3&comparable=all{verified}"
    board = Client().get(f"/api/v1/leaderboard?{lane}").json()
    assert run.id in [row["best_run"]["id"] for row in board["results"]], (lane, board)


def test_a_managed_llama_cpp_recipe_is_started_and_stopped_by_the_worker(
    lab_site, tmp_path, operator, alice_key
) -> None:
    var, tmp = tmp_path / "var-lab-m", tmp_path / "tmp-lab-m"
    tmp.mkdir()
    # The agent's own temporary folder, so other processes' files in /tmp cannot count.
    env = {"BENCHLOOP_VAR_DIR": str(var), "TMPDIR": str(tmp)}
    worker = start_worker(tmp_path, "lab-m", ["cpu.test"], env=env, site=lab_site)
    try:
        approve("lab-m")
        job_id = queue_over_http(
            alice_key,
            target="managed",
            model="smollm2-managed",
            model_path=smollm_gguf(),
            context_length=2048,
            threads=1,
            launch_flags=NATIVE_SERVER_FLAGS,
        )
        job = wait_for(lambda: finished(job_id), 240, "the managed job to finish")
        assert job.status == "succeeded", (job.error, worker.log()[-3000:])
        # The agent clears the attempt's folder after it reports (stopping the server and its
        # heartbeat first): stopping the worker before then would cut that short.
        jobs = var / "lab-jobs"
        wait_for(lambda: jobs.is_dir() and not any(jobs.iterdir()), 60, "the folder to go")
    finally:
        worker.stop()
    messages = [
        e.payload.get("message", "") for e in JobEvent.objects.filter(job_id=job_id, kind="log")
    ]
    assert messages[0].startswith("starting llama-server with SmolLM2-135M-Instruct")
    assert "managed llama.cpp server is healthy" in messages
    assert messages[-1] == "stopped the managed llama.cpp server"
    # The attempt's folder (engine home, server log) went with it; no log was left in /tmp.
    assert (var / "lab-jobs").is_dir() and list((var / "lab-jobs").iterdir()) == []
    assert not list(tmp.glob("llama-server-*.log"))
    run = Run.objects.get(pk=job.run_id)
    assert run.stack.engine == "llama.cpp"
    assert run.is_verified == (run.contention_status != "contended")
    # The worker timed the server's start: the run's cold start, uploaded with the bundle.
    cold = run.raw_payload["cold_start"]
    assert cold["load_source"] == "managed" and 0 < cold["load_s"] < 240
    assert cold["first_request_after_load"] is True
    assert run.raw_payload["resources"]["peak_server_rss_mib"] > 50


def test_a_job_for_a_server_on_another_host_runs_on_that_host(
    lab_site, tmp_path, operator, llm_url, llm_model, monkeypatch
) -> None:
    """The operator picks, in the new-job form, a server that the second host reported: the
    job goes to that host (not to the first host's pool) with the model the server names."""
    near = start_worker(tmp_path, "lab-near", ["cpu.test"], site=lab_site)
    far = start_worker(tmp_path, "lab-far", ["gpu.test"], servers=[llm_url], site=lab_site)
    try:
        approve("lab-near")
        far_host = approve("lab-far")
        wait_for(
            lambda: WorkerHost.objects.get(pk=far_host.pk).inventory, 60, "lab-far's inventory"
        )
        client = Client()
        client.force_login(operator)
        form = client.get("/lab/jobs/new/").context["form"]
        choice = next(value for value, _ in form.fields["server"].choices if "lab-far" in value)
        # Held back until the job is narrowed to one task (the form offers no task list).
        held = []
        monkeypatch.setattr(services, "dispatch_job", lambda **kw: held.append(kw))
        response = client.post(
            "/lab/jobs/new/",
            {"server": choice, "target": "endpoint", "provider": "auto", "profile": ""}
            | {"suites_text": "speed", "trials": 1, "harness": "raw", "max_tokens": 24}
            | {"priority": 5, "binary": "llama-server"},
        )
        assert response.status_code == 302, response.context["form"].errors
        job = BenchmarkJob.objects.get()
        assert (job.pool, job.model) == ("host.lab-far", llm_model)
        BenchmarkJob.objects.filter(pk=job.pk).update(tasks=["speed-p128-n256"])
        monkeypatch.undo()
        assert [kw["pool"] for kw in held] == ["host.lab-far"]
        services.dispatch_job(**held[0])
        job = wait_for(lambda: finished(job.pk), 240, "the job to finish")
        assert job.status == "succeeded", (job.error, far.log()[-3000:])
    finally:
        near.stop()
        far.stop()
    assert job.host.name == "lab-far"
