"""Comparability: every task of the profile scored, or the reasons why not; coverage in tasks.

The end-to-end cases against the real llama.cpp server (a context too small for a long-context
task, a missing code sandbox, Ctrl-C) are in test_cli_run.py and test_engine_orchestrator.py.
"""

from __future__ import annotations

from worker.rules.comparability import assess, coverage_of, reasons_for_bundle, task_state

PROFILE = {"speed": ["speed-p128-n256", "speed-p512-n16"], "longcontext": ["lc-2k", "lc-8k"]}


def _task(task_id: str, **metadata) -> dict:
    return {"task_id": task_id, "score": 50.0, "execution_ok": True, "metadata": metadata}


def _suites(*tasks: tuple[str, dict]) -> dict:
    out: dict = {}
    for suite, task in tasks:
        out.setdefault(suite, {"tasks": []})["tasks"].append(task)
    return out


def _assess(suites: dict, **kwargs) -> dict:
    args = {"status": "complete", "error": None, "custom_selection": False} | kwargs
    return assess(expected=PROFILE, suites=suites, **args)


def test_a_run_with_every_task_scored_is_comparable():
    block = _assess(
        _suites(
            ("speed", _task("speed-p128-n256")),
            ("speed", _task("speed-p512-n16")),
            ("longcontext", _task("lc-2k")),
            ("longcontext", _task("lc-8k")),
        )
    )
    assert block == {
        "comparable": True,
        "reasons": [],
        "tasks_expected": 4,
        "tasks_scored": 4,
        "not_scored": {"context": 0, "sandbox_unavailable": 0, "skipped": 0},
    }
    assert coverage_of(block) == 100.0


def test_a_long_context_task_skipped_for_a_small_context_makes_it_non_comparable():
    skipped = _task(
        "lc-8k",
        skipped=True,
        skip_reason="prompt exceeds the server's context: the request exceeds the context size",
        error_kind="context_overflow",
    )
    block = _assess(
        _suites(
            ("speed", _task("speed-p128-n256")),
            ("speed", _task("speed-p512-n16")),
            ("longcontext", _task("lc-2k")),
            ("longcontext", skipped),
        ),
        context_length=4096,
    )
    assert block["comparable"] is False
    assert block["reasons"] == [
        "1 task skipped or cut off: the server's context (4096 tokens) is too small"
    ]
    assert (block["tasks_scored"], coverage_of(block)) == (3, 75.0)


def test_an_interrupted_run_counts_the_tasks_it_scored_not_its_suites():
    block = _assess(
        _suites(("speed", _task("speed-p128-n256"))),
        status="incomplete",
        error={"kind": "interrupted", "message": "interrupted after 1 of 4 tasks"},
    )
    assert block["reasons"] == ["interrupted after 1 of 4 tasks"]
    assert coverage_of(block) == 25.0  # one task of four; the old suite weights said 20


def test_sandbox_refusals_speed_context_overflows_filters_and_caps_each_have_a_reason():
    refused = _task("code-01", error_kind="sandbox_unavailable")
    overflow = _task(
        "speed-p512-n16",
        trials=[
            {"warmup": False, "ok": False, "error_kind": "context_overflow"},
            {"warmup": False, "ok": False, "error_kind": "context_overflow"},
        ],
    )
    block = _assess(
        _suites(("speed", _task("speed-p128-n256")), ("speed", overflow), ("coding", refused)),
        custom_selection=True,
        task_filter=["speed-*", "code-01"],
        max_tokens_cap=16,
    )
    assert block["reasons"] == [
        "custom suite selection, not a named profile",
        "--tasks speed-*,code-01 ran a subset of the profile",
        "--max-tokens 16 caps the answers",
        "1 task skipped or cut off: the server's context is too small",
        "1 coding task not run: no code sandbox",
    ]
    assert block["not_scored"] == {"context": 1, "sandbox_unavailable": 1, "skipped": 0}
    assert task_state(refused) == "sandbox_unavailable" and task_state(_task("x")) is None


def test_a_complete_run_missing_profile_tasks_says_so_and_failures_are_redacted():
    block = _assess(_suites(("speed", _task("speed-p128-n256"))))
    assert block["reasons"] == ["3 tasks of the profile not run"]
    failed = _assess(
        {},
        status="failed",
        error={"kind": "unreachable", "message": "cannot reach http://10.0.0.7:8080/v1"},
    )
    assert failed["reasons"] == ["the run failed: cannot reach ‹redacted›"]


def test_bundles_before_1_1_get_the_reasons_their_contents_show():
    old = {
        "bundle_schema_version": "1.0",
        "status": "complete",
        "comparable": True,  # what the old engine said about a run with a skipped task
        "coverage_score": 100.0,
        "benchmark_profile": "full",
        "launch": {"context_length": 2048},
        "settings": {"task_filter": [], "max_tokens_cap": None},
        "suites": _suites(
            ("longcontext", _task("lc-2k")),
            ("longcontext", _task("lc-8k", skipped=True, skip_reason="prompt exceeds the context")),
        ),
    }
    assert reasons_for_bundle(old) == [
        "1 task skipped or cut off: the server's context (2048 tokens) is too small"
    ]
    legacy_partial = {"comparable": False, "coverage_score": 40.0, "benchmark_profile": "custom"}
    assert reasons_for_bundle(legacy_partial) == [
        "custom suite selection, not a named profile",
        "covers 40% of its profile",
    ]
    assert reasons_for_bundle({"comparable": False}) == ["not comparable (no reason recorded)"]
    new = {"comparability": {"comparable": False, "reasons": ["interrupted after 2 of 9 tasks"]}}
    assert reasons_for_bundle(new) == ["interrupted after 2 of 9 tasks"]


def test_a_prompt_the_server_cut_short_is_not_scored():
    """benchloop-cli 0.3.0's own 'full' fixture: Ollama cut 2k–32k long-context prompts to 80
    tokens without an error, and the run still said comparable."""
    legacy = {"target_context_tokens": 8192, "provider_prompt_tokens": 80}
    assert task_state({"task_id": "longcontext-8k-middle", "metadata": legacy}) == "context"
    ours = {"task_id": "lc-2k", "tokens_prompt": 1890, "metadata": {"target_tokens": 2000}}
    assert task_state(ours) is None  # a tokenizer's few percent off the target is no cut
    assert task_state({**ours, "tokens_prompt": 700}) == "context"
