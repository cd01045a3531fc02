"""Quality tasks N at a time (issue 35): how N is chosen, and on a real 4-slot llama.cpp server
the same verdicts, task order and coherent events at N=1 and N=4, with requests truly overlapped."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from worker.engine.bundle import validation_errors
from worker.engine.errors import UsageError
from worker.engine.orchestrator import execute, prepare_run
from worker.engine.parallel import DEFAULT_CAP, MAX_PARALLEL, Parallelism, choose, workers_for
from worker.engine.plan import RunConfig
from worker.engine.suites import available_suites
from worker.engine.testing.xllama_launcher import ServerHandle, start_server

SLOTS = 4
# Short prompts the small model answers in seconds: single requests judged by a verifier, and
# a multi-turn agent tool loop (its tasks run in parallel too).
SUITES = ["instructfollow", "reasonmath", "agent"]
TASKS = ["if-01", "if-02", "if-03", "if-04", "if-08", "rm-02", "rm-05", "ag-01"]


@pytest.fixture(scope="module")
def four_slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """Four slots of 2,048 tokens each (apart: n_ctx is split between them). One thread: on a
    shared, oversubscribed machine, two spinning ggml threads slow each other down many times.
    One server for the module: no test here is about starting it, and each run leaves every
    slot idle (a cancel lets the running tasks finish)."""
    handle = start_server(
        parallel=SLOTS,
        n_ctx=SLOTS * 2048,
        threads=1,
        log_dir=tmp_path_factory.mktemp("four-slots"),
    )
    try:
        yield handle
    finally:
        handle.stop()


def test_the_default_is_the_servers_slot_count_capped_and_an_option_wins():
    props = {"parallel_slots": 16, "slots_source": "llama.cpp /props total_slots"}
    assert choose(None, props) == Parallelism(None, DEFAULT_CAP, props["slots_source"], 16)
    assert choose(None, {"parallel_slots": 2, "slots_source": "llama.cpp /slots"}).used == 2
    # Ollama reports no slots: one at a time, and the bundle says why.
    assert choose(None, {"parallel_slots": None}) == Parallelism(
        None, 1, "no slot count reported", None
    )
    assert choose(8, props) == Parallelism(8, 8, "option", 16)
    assert choose(3, {}).as_dict() == {
        "asked": 3,
        "used": 3,
        "source": "option",
        "server_slots": None,
        "default_cap": DEFAULT_CAP,
    }
    for wrong in (0, MAX_PARALLEL + 1):
        with pytest.raises(UsageError, match="--parallel"):
            choose(wrong, props)


def test_speed_sweeps_long_prompts_and_caged_harnesses_stay_serial():
    suites = available_suites()
    four = Parallelism(None, 4, "llama.cpp /props total_slots", 4)
    serial = {"speed", "speed_sweep", "longcontext", "matrix_bugfix", "matrix_tools", "matrix_long"}
    assert {name for name, suite in suites.items() if workers_for(suite, four) == 1} == serial
    assert workers_for(suites["agent"], four) == 4
    assert workers_for(suites["coding"], Parallelism(2, 2, "option")) == 2


class _SlotWatch:
    """Polls the server's /slots while a run goes on: the most slots busy at once."""

    def __init__(self, url: str):
        self.url, self.most = url, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as client:
            while not self.done.is_set():
                slots = client.get("/slots").json()
                self.most = max(self.most, sum(1 for s in slots if s.get("is_processing")))
                time.sleep(0.05)

    def __enter__(self) -> _SlotWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(timeout=10)


def _run(url: str, home, parallel: int | None, should_stop=None):
    events: list[dict] = []
    prep = prepare_run(RunConfig(url=url, suites=SUITES, tasks=TASKS, parallel=parallel, home=home))
    try:
        outcome = execute(prep, on_event=events.append, should_stop=should_stop)
    finally:
        prep.provider.close()
    return outcome, events


def _verdicts(bundle) -> list[tuple]:
    return [
        (s, t["task_id"], t["passed"], t["score"], t["execution_ok"], t["error"])
        for s, record in bundle["suites"].items()
        for t in record["tasks"]
    ]


def _check_events(events: list[dict], bundle) -> None:
    """One task_started before each task_completed, counts 1..n in order, suites not mixed."""
    started: set[str] = set()
    completed: list[str] = []
    suite = None
    for event in events:
        if event["type"] == "suite_started":
            suite = event["suite"]
        elif event["type"] == "task_started":
            assert event["suite"] == suite and event["task_id"] not in started
            started.add(event["task_id"])
        elif event["type"] == "task_completed":
            assert event["suite"] == suite and event["task_id"] in started
            assert event["completed_tasks"] == len(completed) + 1
            completed.append(event["task_id"])
    assert sorted(completed) == sorted(started)
    assert len(completed) == sum(len(s["tasks"]) for s in bundle["suites"].values())


@pytest.mark.llm
def test_four_at_a_time_on_four_slots_gives_the_verdicts_of_one_at_a_time(four_slots, bench_home):
    server = four_slots
    serial, serial_events = _run(server.base_url, bench_home, parallel=1)
    with _SlotWatch(server.base_url) as watch:
        # No --parallel: the default reads the server's four slots.
        wide, wide_events = _run(server.base_url, bench_home, parallel=None)
    assert serial.status == wide.status == "complete"
    assert serial.bundle["settings"]["parallel"] == {
        "asked": 1,
        "used": 1,
        "source": "option",
        "server_slots": SLOTS,
        "default_cap": DEFAULT_CAP,
    }
    assert wide.bundle["settings"]["parallel"]["used"] == SLOTS
    assert wide.bundle["settings"]["parallel"]["source"] == "llama.cpp /props total_slots"
    # The server had several of the run's requests in hand at once.
    assert watch.most >= 2
    # Same tasks, same order (the data file's), same verdicts and scores.
    verdicts = _verdicts(serial.bundle)
    assert [v[1] for v in verdicts] == TASKS
    assert _verdicts(wide.bundle) == verdicts
    assert all(v[4] for v in verdicts)  # every task answered: nothing equal by failing alike
    for suite in SUITES:
        assert wide.bundle["suites"][suite]["score"] == serial.bundle["suites"][suite]["score"]
    assert wide.bundle["quality_score"] == serial.bundle["quality_score"]
    for outcome, events in ((serial, serial_events), (wide, wide_events)):
        _check_events(events, outcome.bundle)
        assert validation_errors(outcome.bundle) == []
    # Four tasks were handed out before the first answer came back.
    first_done = next(i for i, e in enumerate(wide_events) if e["type"] == "task_completed")
    assert sum(e["type"] == "task_started" for e in wide_events[:first_done]) == SLOTS


@pytest.mark.llm
def test_a_cancel_lets_the_running_tasks_finish_and_starts_no_more(four_slots, bench_home):
    server = four_slots
    events: list[dict] = []

    def stop_after_first_answer() -> bool:
        return any(e["type"] == "task_completed" for e in events)

    tasks = [f"if-0{n}" for n in range(1, 9)]
    prep = prepare_run(
        RunConfig(
            url=server.base_url,
            suites=["instructfollow"],
            tasks=tasks,
            max_tokens=16,
            home=bench_home,
        )
    )
    try:
        outcome = execute(prep, on_event=events.append, should_stop=stop_after_first_answer)
    finally:
        prep.provider.close()
    assert outcome.status == "cancelled"
    bundle = outcome.bundle
    # The four handed out before the stop all finished and are kept, in task order; no fifth
    # was started.
    assert [t["task_id"] for t in bundle["suites"]["instructfollow"]["tasks"]] == tasks[:SLOTS]
    assert bundle["status"] == "incomplete" and bundle["error"]["kind"] == "cancelled"
    _check_events(events, bundle)
    assert events[-1]["type"] == "cancelled"
