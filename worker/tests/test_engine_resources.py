"""Energy, memory and cold start through a whole run against a real llama.cpp server.

NVML is not on this machine: one run shows what the bundle says without it (energy "not
measured", the server's RAM still sampled, the managed server's load time); the others install
the power-trace stand-in (worker.engine.testing.power_trace) as pynvml for the whole run, so
hardware detection, the contention probe and the power monitor all read the recorded trace,
and the joules in the bundle are checked against a hand calculation from what the stand-in
answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from worker.engine.bundle import validation_errors
from worker.engine.orchestrator import execute, prepare_run, run_benchmark
from worker.engine.plan import RunConfig
from worker.engine.power import METHOD
from worker.engine.providers.base import ChatResponse
from worker.engine.providers.ollama import _State
from worker.engine.resources import cold_start_block, ollama_model_loaded
from worker.engine.testing.nvml_trace import nvml_present
from worker.engine.testing.power_trace import PowerTraceNvml
from worker.engine.testing.xllama_launcher import NATIVE_SERVER_FLAGS, model_path
from worker.managed import start_server
from worker.tests.test_engine_stack_identity import ollama  # noqa: F401  (the Ollama stand-in)

TRACE = Path(__file__).parent / "data/nvml/two-4090-decode.json"


def _trials(bundle: dict) -> list[dict]:
    return [t for task in bundle["suites"]["speed"]["tasks"] for t in task["metadata"]["trials"]]


@pytest.mark.llm
@pytest.mark.skipif(nvml_present(), reason="this machine has NVML: energy would be measured")
def test_without_nvml_energy_is_not_measured_but_ram_and_cold_start_are(bench_home):
    server = start_server(
        binary="llama-server",
        model_path=str(model_path()),
        alias="smol-cold",
        context_length=2048,
        threads=1,
        extra_flags=NATIVE_SERVER_FLAGS,
    )
    try:
        assert server.load_s is not None and 0 < server.load_s < 120
        config = RunConfig(
            url=server.url,
            tasks=["speed-p128-n256"],
            trials=2,
            max_tokens=16,
            home=bench_home,
            server_load_s=server.load_s,
        )
        prep = prepare_run(config)
        try:
            outcome = execute(prep)
        finally:
            prep.provider.close()
        rss_after = psutil.Process(server.process.pid).memory_info().rss / 1024**2
    finally:
        server.stop()
    bundle = outcome.bundle
    assert validation_errors(bundle) == []
    resources = bundle["resources"]
    assert resources["energy_method"] is None
    assert resources["energy_note"].startswith("not measured: NVML is not available")
    assert resources["gpu_devices_seen"] == 0 and resources["peak_vram_mib"] == {}
    # The server's own RAM: the model is mapped and loaded, so well over 50 MiB, and the peak
    # is at least what the process holds once the run is over.
    assert resources["peak_server_rss_mib"] >= max(50.0, rss_after * 0.95)
    assert resources["server_rss_note"] == ""
    assert resources["energy"]["trials"] == 2 and resources["energy"]["trials_measured"] == 0
    assert resources["energy"]["joules_per_output_token"] is None
    assert "NVML is not available" in resources["energy"]["note"]
    for trial in _trials(bundle):
        assert trial["energy"]["joules_per_output_token"] is None
        assert trial["energy"]["decode"]["joules"] is None
        assert "NVML is not available" in trial["energy"]["note"]
    cold = bundle["cold_start"]
    assert cold["load_s"] == server.load_s and cold["load_source"] == "managed"
    assert cold["first_request_after_load"] is True and cold["first_request_ms"] > 0


def _by_hand(answers: list[tuple[float, int, float]], start: float, end: float) -> float:
    """Trapezoids between the stand-in's answers, each device on its own, the first and last
    segment cut at the window's edges along the straight line between their two readings."""
    total = 0.0
    for device in (0, 1):
        points = [(t, w) for t, d, w in answers if d == device]
        for (ta, wa), (tb, wb) in zip(points, points[1:], strict=False):
            lo, hi = max(ta, start), min(tb, end)
            if hi <= lo:
                continue
            slope = (wb - wa) / (tb - ta)
            w_lo, w_hi = wa + slope * (lo - ta), wa + slope * (hi - ta)
            total += (w_lo + w_hi) / 2 * (hi - lo)
    return total


@pytest.mark.llm
def test_trace_power_gives_joules_per_token_that_match_a_hand_calculation(
    llm_url, bench_home, monkeypatch
):
    nvml = PowerTraceNvml(TRACE)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    outcome = run_benchmark(
        RunConfig(url=llm_url, tasks=["speed-p128-n256"], trials=3, max_tokens=32, home=bench_home)
    )
    bundle = outcome.bundle
    assert validation_errors(bundle) == []
    assert [g["name"] for g in bundle["hardware"]["gpus"]] == ["NVIDIA RTX 4090"] * 2
    resources = bundle["resources"]
    assert resources["energy_method"] == METHOD and resources["energy_note"] == ""
    assert resources["gpu_devices_expected"] == resources["gpu_devices_seen"] == 2
    # Idle power is the first sample's two boards (the trace starts at idle: 31 + 29.5 W).
    first = [w for _, _, w in nvml.answers[:2]]
    assert resources["idle_watts"] == pytest.approx(sum(first))
    vram = [r["vram_mib"] for r in nvml.rows]
    assert set(resources["peak_vram_mib"]) == {"0", "1"}
    for device in (0, 1):
        assert min(v[device] for v in vram) <= resources["peak_vram_mib"][str(device)]
        assert resources["peak_vram_mib"][str(device)] <= max(v[device] for v in vram)
    # The monitor's clock started just before its first sample asked for power.
    origin = nvml.answers[0][0]
    trials = _trials(bundle)
    assert len(trials) == 3
    for trial in trials:
        energy = trial["energy"]
        assert energy["note"] == "", energy
        for window, tokens in (
            ("prefill", trial["prompt_tokens"] - (trial["cached_tokens"] or 0)),
            ("decode", trial["completion_tokens"] - 1),
        ):
            block = energy[window]
            start, end = (origin + s for s in block["window_s"])
            expected = _by_hand(nvml.answers, start, end)
            # The monitor stamps a sample once, before it asks each board; the stand-in notes
            # each board's own answer time. A stall between the two on a busy machine moves a
            # reading by milliseconds: 0.10% once in a whole-suite run (246.10 against 246.35 J).
            assert block["joules"] == pytest.approx(expected, rel=3e-3, abs=1e-3)
            assert block["tokens"] == tokens
        # The windows are the trial's own timings.
        prefill_s = energy["prefill"]["window_s"]
        decode_s = energy["decode"]["window_s"]
        assert prefill_s[1] == decode_s[0]
        assert (prefill_s[1] - prefill_s[0]) * 1000 == pytest.approx(trial["ttft_ms"], abs=0.1)
        assert (decode_s[1] - prefill_s[0]) * 1000 == pytest.approx(trial["e2e_ms"], abs=0.1)
        per_output = energy["decode"]["joules"] / (trial["completion_tokens"] - 1)
        assert energy["joules_per_output_token"] == pytest.approx(per_output, rel=1e-4)
        # Between the two boards' idle floor and their prefill peak, whatever part of the trace
        # the window fell on.
        span = decode_s[1] - decode_s[0]
        assert 60.0 * span * 0.99 <= energy["decode"]["joules"] <= 700.0 * span
    summary = resources["energy"]
    assert summary["trials"] == summary["trials_measured"] == 3
    per_token = sorted(t["energy"]["joules_per_output_token"] for t in trials)
    assert summary["joules_per_output_token"] == pytest.approx(per_token[1], rel=1e-6)


@pytest.mark.llm
def test_a_board_that_stops_answering_reports_no_energy_but_keeps_memory(
    llm_url, bench_home, monkeypatch
):
    monkeypatch.setitem(sys.modules, "pynvml", PowerTraceNvml(TRACE, drop_device=1))
    outcome = run_benchmark(
        RunConfig(url=llm_url, tasks=["speed-p128-n256"], trials=1, max_tokens=16, home=bench_home)
    )
    bundle = outcome.bundle
    assert validation_errors(bundle) == []
    resources = bundle["resources"]
    assert resources["gpu_devices_expected"] == 2
    assert resources["idle_watts"] is None  # no idle figure from one board of two
    assert list(resources["peak_vram_mib"]) == ["0"]
    assert resources["energy"]["joules_per_output_token"] is None
    assert resources["energy"]["note"] == "1 of 2 GPUs reported power"
    (trial,) = _trials(bundle)
    assert trial["energy"]["decode"]["joules"] is None
    assert trial["energy"]["prefill"]["note"] == "1 of 2 GPUs reported power"


# Ollama's final chat event, in the shape its API documents: the model took 2.1 s to load.
OLLAMA_FINAL = {
    "model": "smollm2:135m",
    "created_at": "2026-12-01T21:00:00.000000Z",
    "message": {"role": "assistant", "content": "OK."},
    "done": True,
    "done_reason": "stop",
    "total_duration": 2_400_000_000,
    "load_duration": 2_100_000_000,
    "prompt_eval_count": 26,
    "prompt_eval_duration": 130_000_000,
    "eval_count": 3,
    "eval_duration": 60_000_000,
}


def test_ollama_s_load_duration_is_the_load_time_when_the_model_was_not_loaded(
    ollama,  # noqa: F811
    bench_home,
):
    url, _ = ollama
    prep = prepare_run(RunConfig(url=url, model="smollm2:135m", home=bench_home))
    try:
        loaded = ollama_model_loaded(prep)  # the stand-in's /api/ps lists no model
    finally:
        prep.provider.close()
    assert loaded is False
    state = _State()
    state.add(OLLAMA_FINAL)
    response = ChatResponse()
    state.apply(response)
    assert response.server is not None and response.server.load_ms == 2100.0
    assert cold_start_block(prep, response, 2345.67, loaded) == {
        "load_s": 2.1,
        "load_source": "ollama",
        "first_request_ms": 2345.7,
        "first_request_after_load": True,
        "note": "",
    }
    # Already in memory: Ollama still reports a few ms of "load", which is no cold start.
    warm = cold_start_block(prep, response, 80.0, True)
    assert warm["load_s"] is None and warm["first_request_after_load"] is False
    assert "already loaded" in warm["note"]
