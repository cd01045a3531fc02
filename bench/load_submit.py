"""Upload load: concurrent clients POST run bundles to /api/v1/runs on gunicorn + Postgres + Redis.

The plan: `--uploads` requests from `--clients` clients (one user and API key each, half of
them trusted so their clean runs are auto-approved and published). 20% are retries of an
earlier upload by the same client (same bytes, so the same client run id), sent after the
original's answer arrived; 5% are invalid (truncated JSON, a missing model id, a NaN score, an
unknown bundle major). The rest are new ~30 KB v3 bundles in the shape `benchloop submit`
sends (the smoke-profile fixture as bundle 1, 39 tasks, 27 speed trials), each with its own
model, quantization, GPU, time and scores.

Every answer is checked (201 new, 200 retry with the original's run id marked a duplicate,
400/422 invalid), and afterwards the database must hold exactly one run per valid new upload,
each complete (suites, tasks, samples, submission, upload attempt), and nothing else.

Usage: .venv/bin/python bench/load_submit.py [--uploads 5000] [--clients 32] [--workers 3]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import statistics
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadlib import (  # noqa: E402
    REPO,
    CpuMeter,
    Gunicorn,
    RssSampler,
    closed_loop,
    flush_redis,
    fresh_database,
    load_average,
    manage,
    percentile,
    server_env,
)

DB = "benchloop_load"
FIXTURE = (
    Path(os.environ.get("BENCHLOOP_FIXTURES_DIR", REPO.parent / "shared/fixtures/benchloop"))
    / "generated/v3-smoke-local-run.json"
)
MODELS = [
    f"{family}:{size}b"
    for family in ("qwen3", "llama3.1", "gemma3", "mistral", "phi4")
    for size in (1, 4, 8, 14, 32, 70)
]
QUANTS = ["Q4_K_M", "Q5_K_M", "Q8_0", "F16"]
GPUS = [
    ("NVIDIA RTX 4090", 24.0),
    ("NVIDIA RTX 3090", 24.0),
    ("NVIDIA RTX 4060 Ti", 16.0),
    ("AMD Radeon RX 7900 XTX", 24.0),
    ("Apple M3 Max", 64.0),
    ("NVIDIA A100", 80.0),
]
INVALID = [  # (kind, expected status)
    ("truncated-json", 400),
    ("missing-model-id", 400),
    ("nan-score", 400),
    ("unknown-bundle-major", 422),
]


def template() -> dict:
    """The smoke fixture as the CLI uploads it: bundle schema 1, no machine id or endpoint."""
    run = json.loads(FIXTURE.read_text())
    run["bundle_schema_version"] = "1.0"
    run["status"] = "complete"
    for field in ("machine_id", "endpoint", "remote_host"):
        run["machine"].pop(field, None)
    return run


def make_bundle(base: dict, rng: random.Random, number: int, client: int) -> dict:
    bundle = copy.deepcopy(base)
    model = rng.choice(MODELS)
    gpu, vram = rng.choice(GPUS)
    started = datetime(2026, 6, 1, tzinfo=UTC) + timedelta(seconds=37 * number)
    bundle["client_run_id"] = bundle["run_id"] = f"load-{client:02d}-{number:05d}"
    bundle["timestamp"] = started.isoformat()
    bundle["model"] = {**bundle["model"], "model_id": model, "quantization": rng.choice(QUANTS)}
    bundle["machine"].update(gpu=gpu, gpu_memory_gb=vram, hardware_label=f"{gpu} {vram:g}GB")
    # Scores that agree with each other, so the integrity checks have nothing to flag.
    quality = round(rng.uniform(20, 85), 2)
    for name in ("toolcall", "reasonmath"):
        bundle["suites"][name]["score"] = quality
    bundle["quality_score"] = quality
    speed, reliability = bundle["speed_score"], bundle["reliability_score"]
    bundle["overall_score"] = round(0.70 * quality + 0.25 * speed + 0.05 * reliability, 2)
    return bundle


def invalid_body(kind: str, bundle: dict) -> bytes:
    if kind == "truncated-json":
        return json.dumps(bundle).encode()[:700]
    broken = copy.deepcopy(bundle)
    if kind == "missing-model-id":
        del broken["model"]["model_id"]
    elif kind == "unknown-bundle-major":
        broken["bundle_schema_version"] = "2.0"
    text = json.dumps(broken)
    if kind == "nan-score":
        text = text.replace(f'"overall_score": {broken["overall_score"]}', '"overall_score": NaN')
    return text.encode()


def build_plan(uploads: int, clients: int, seed: int = 8) -> tuple[list[dict], list[list[int]]]:
    """Every request (kind, client, body, expected status) and each client's order of them."""
    rng = random.Random(seed)
    base = template()
    n_retry, n_invalid = uploads * 20 // 100, uploads * 5 // 100
    kinds = ["new"] * (uploads - n_retry - n_invalid) + ["retry"] * n_retry
    kinds += ["invalid"] * n_invalid
    rng.shuffle(kinds)
    plan: list[dict] = []
    order: list[list[int]] = [[] for _ in range(clients)]
    sent_new: list[list[int]] = [[] for _ in range(clients)]
    for number, kind in enumerate(kinds):
        client = number % clients
        if kind == "retry" and not sent_new[client]:
            kind = "new"  # nothing to retry yet for this client
        if kind == "retry":
            original = plan[rng.choice(sent_new[client])]
            item = {
                "kind": "retry",
                "client": client,
                "body": original["body"],
                "expect": 200,
                "original": original["index"],
            }
        elif kind == "invalid":
            bad, status = INVALID[len(plan) % len(INVALID)]
            body = invalid_body(bad, make_bundle(base, rng, number, client))
            item = {"kind": bad, "client": client, "body": body, "expect": status}
        else:
            bundle = make_bundle(base, rng, number, client)
            item = {
                "kind": "new",
                "client": client,
                "body": json.dumps(bundle).encode(),
                "expect": 201,
                "client_run_id": bundle["client_run_id"],
            }
            sent_new[client].append(len(plan))
        item["index"] = len(plan)
        order[client].append(len(plan))
        plan.append(item)
    return plan, order


def setup_users(clients: int) -> list[str]:
    """One user and submit key per client through the project's own services."""
    from django.contrib.auth.models import User

    from submissions.models import SubmitterProfile
    from submissions.services import create_api_key

    keys = []
    for number in range(clients):
        user = User.objects.create_user(f"loader{number:02d}", f"loader{number}@example.org")
        SubmitterProfile.objects.create(user=user, is_trusted=number % 2 == 0)
        keys.append(create_api_key(user=user, name="load", scopes=["submit"])[1])
    return keys


def check_answers(plan: list[dict], samples) -> list[str]:
    problems = []
    answers = {s.index: s for s in samples}
    for item in plan:
        got = answers[item["index"]]
        if got.status != item["expect"]:
            problems.append(
                f"#{item['index']} {item['kind']}: {got.status} != {item['expect']}"
                f" {got.body[:200]!r}"
            )
            continue
        if item["kind"] == "new":
            item["run_id"] = json.loads(got.body)["id"]
            if json.loads(got.body)["client_run_id"] != item["client_run_id"]:
                problems.append(f"#{item['index']}: wrong client run id in the answer")
    for item in plan:
        if item["kind"] == "retry":
            body = json.loads(answers[item["index"]].body)
            # A repeat answers 200 with the run first stored, marked a duplicate (issue 32).
            if body["id"] != plan[item["original"]].get("run_id") or body["duplicate"] is not True:
                problems.append(f"#{item['index']} retry: answered run {body['id']}")
    return problems[:20]


def check_database(plan: list[dict], base_tasks: int, base_samples: int) -> list[str]:
    """Exactly the expected runs, each stored completely; nothing partial, nothing extra."""
    from django.db.models import Count

    from runs.models import Run, SpeedSample, SuiteResult, TaskResult
    from submissions.models import Submission, UploadAttempt

    new = [item for item in plan if item["kind"] == "new"]
    expected = {(f"loader{item['client']:02d}", item["client_run_id"]) for item in new}
    stored = set(Submission.objects.values_list("submitter__username", "client_run_id"))
    problems = []
    runs = Run.objects.count()
    if runs != len(new) or stored != expected or Submission.objects.count() != len(new):
        problems.append(
            f"{runs} runs and {len(stored)} submissions for {len(new)} uploads; "
            f"missing {len(expected - stored)}, unexpected {len(stored - expected)}"
        )
    if Run.objects.filter(submission__isnull=True).exists():
        problems.append("a run without a submission")
    suites = Run.objects.annotate(n=Count("suite_results")).exclude(n=3).count()
    if suites:
        problems.append(f"{suites} runs without their 3 suites")
    if TaskResult.objects.count() != base_tasks * len(new):
        problems.append(f"{TaskResult.objects.count()} task rows, expected {base_tasks * len(new)}")
    if SpeedSample.objects.count() != base_samples * len(new):
        problems.append(f"{SpeedSample.objects.count()} samples != {base_samples * len(new)}")
    if SuiteResult.objects.count() != 3 * len(new):
        problems.append("suite rows do not add up")
    if UploadAttempt.objects.count() != len(new):
        problems.append(f"{UploadAttempt.objects.count()} upload attempts for {len(new)} runs")
    return problems


def _site(env: dict[str, str], clients: int) -> list[str]:
    """A fresh database and broker, migrated, with one uploader (and API key) per client."""
    fresh_database(DB)
    flush_redis()
    manage(env, "migrate", "-v", "0")
    os.environ.update({k: v for k, v in env.items() if k != "PATH"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
    import django

    django.setup()
    from django.db import connection

    keys = setup_users(clients)
    connection.close()
    return keys


def _counts(plan: list[dict]) -> tuple[int, int]:
    """The template bundle's task and trial counts, after printing what the plan holds."""
    base = template()
    tasks = sum(len(s["tasks"]) for s in base["suites"].values())
    trials = sum(
        len(t.get("metadata", {}).get("trials", []))
        for s in base["suites"].values()
        for t in s["tasks"]
    )
    sizes = [len(item["body"]) for item in plan if item["kind"] == "new"]
    print(
        f"plan: {Counter(item['kind'] for item in plan)}; new bundle median "
        f"{statistics.median(sizes) / 1024:.1f} KiB, {tasks} tasks, {trials} trials"
    )
    return tasks, trials


def _report(result, meter: CpuMeter, peak: dict, loads: tuple) -> None:
    statuses = Counter(s.status for s in result.samples)
    accepted = statuses[200] + statuses[201]
    ok = result.latencies_ms((200, 201))
    print(f"statuses: {dict(sorted(statuses.items()))}; wall {result.wall_s:.1f} s")
    print(
        f"accepted (200+201): {accepted / result.wall_s:.1f}/s; new runs (201): "
        f"{statuses[201] / result.wall_s:.1f}/s; "
        f"all requests {len(result.samples) / result.wall_s:.1f}/s"
    )
    print(
        f"latency of accepted uploads: p50 {percentile(ok, 0.5):.0f} ms, "
        f"p99 {percentile(ok, 0.99):.0f} ms; invalid p50 "
        f"{percentile(result.latencies_ms((400, 422)), 0.5):.0f} ms"
    )
    cpu = ", ".join(
        f"{group} {seconds / accepted * 1000:.1f}" for group, seconds in meter.used.items()
    )
    print(
        f"CPU per accepted upload (ms): {cpu}; in all "
        f"{sum(meter.used.values()) / result.wall_s:.2f} cores busy of {os.cpu_count()}"
    )
    print(f"peak web worker RSS: {', '.join(f'{v:.0f}' for v in peak.values())} MiB")
    print(f"load average (1, 5, 15 min) before: {loads[0]}; after: {loads[1]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uploads", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn sync workers")
    parser.add_argument("--port", type=int, default=8611)
    args = parser.parse_args()

    env = server_env(DB, THROTTLE_UPLOAD="100000/minute")
    keys = _site(env, args.clients)
    plan, order = build_plan(args.uploads, args.clients)
    tasks, trials = _counts(plan)
    headers = [
        {"Authorization": f"Bearer {key}", "Content-Type": "application/json"} for key in keys
    ]
    queues = [
        [(i, "POST", "/api/v1/runs", plan[i]["body"], headers[c]) for i in order[c]]
        for c in range(args.clients)
    ]

    with Gunicorn(env, args.port, args.workers) as server:
        server.wait_ready()

        meter = CpuMeter(server)

        async def run():
            sampler = RssSampler(server)
            sampler.start()
            meter.start()
            result = await closed_loop(server.port, queues, keep_body=True)
            meter.stop()
            await sampler.stop()
            return result, sampler.peak

        before = load_average()
        result, peak = asyncio.run(run())
        after = load_average()

    _report(result, meter, peak, (before, after))
    problems = check_answers(plan, result.samples) + check_database(plan, tasks, trials)
    for problem in problems:
        print("PROBLEM:", problem)
    print(
        "database check:",
        "FAILED" if problems else "exactly the expected runs, each complete, every answer correct",
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
