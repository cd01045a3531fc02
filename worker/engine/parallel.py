"""Quality tasks N at a time (``--parallel``): how many, and the loop that runs a suite's tasks.

N is what the user asked, else the server's reported slot count capped at ``DEFAULT_CAP``, else
1. Speed and the sweeps always run one request at a time on an idle server: they measure it,
and every suite runs to its end before the next begins, so nothing overlaps them. A quality
suite runs N at a time only where its ``Suite.parallel_tasks`` allows it. Each worker thread
has its own connection (httpx clients are not shared across threads); events and every bundle
write stay on the caller's thread, so a live display and a lab agent's event stream see the
events they see in a serial run, only with completions out of task order. Requests, seeds and
verdicts are the same at any N: only the order in which answers arrive changes.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..rules.contract import RunEvent, TaskRecord, TaskStarted
from ..rules.scoring import SPEED_SUITES
from .errors import EngineError, UsageError
from .suites import RunCancelled, RunContext, Suite
from .suites.base import task_record

log = logging.getLogger(__name__)

# The default's ceiling: a server reporting 16 slots still gets 4 streams unless --parallel asks
# for more. Quality answers are long; past 4 the gain on one GPU is small and the client's own
# work per second (issue 35's "light client") grows with every stream.
DEFAULT_CAP = 4
# --parallel's ceiling: more than the server has slots only queues requests at the server.
MAX_PARALLEL = 16


@dataclass(frozen=True)
class Parallelism:
    """How many quality tasks run at once: asked (None: the default), used, and why."""

    asked: int | None = None
    used: int = 1
    source: str = "no slot count reported"
    slots: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The bundle's ``settings.parallel``."""
        return {
            "asked": self.asked,
            "used": self.used,
            "source": self.source,
            "server_slots": self.slots,
            "default_cap": DEFAULT_CAP,
        }


def check(asked: int | None) -> None:
    """A --parallel outside 1..MAX_PARALLEL is a usage error, before any request."""
    if asked is not None and not 1 <= asked <= MAX_PARALLEL:
        raise UsageError(f"--parallel must be between 1 and {MAX_PARALLEL}")


def choose(asked: int | None, facts: Mapping[str, Any]) -> Parallelism:
    """N from the option, else from the server's slots (``sweeps.server_facts``), else 1."""
    check(asked)
    slots = facts.get("parallel_slots")
    slots = slots if isinstance(slots, int) and slots > 0 else None
    if asked is not None:
        return Parallelism(asked, asked, "option", slots)
    if slots is None:
        return Parallelism(None, 1, "no slot count reported", None)
    return Parallelism(None, min(slots, DEFAULT_CAP), str(facts.get("slots_source")), slots)


def workers_for(suite: Suite, parallel: Parallelism) -> int:
    """The suite's share of N: 1 for speed, the sweeps and suites that must run serially."""
    if suite.name in SPEED_SUITES or not suite.parallel_tasks:
        return 1
    return parallel.used


def run_one(suite: Suite, task: dict[str, Any], ctx: RunContext) -> TaskRecord:
    """Run a task; a bug in suite code becomes a task error instead of ending the run."""
    try:
        return suite.run_task(task, ctx)
    except RunCancelled:
        raise
    except EngineError as exc:
        return task_record(task, suite.name, error=exc.message, metadata={"error_kind": exc.kind})
    except Exception as exc:
        log.exception("suite %s crashed on %s", suite.name, task["id"])
        return task_record(
            task,
            suite.name,
            error=f"internal error: {type(exc).__name__}: {exc}",
            metadata={"error_kind": "internal"},
        )


def run_tasks(
    suite: Suite, tasks: list[dict[str, Any]], ctx: RunContext, workers: int
) -> Iterator[tuple[int, TaskRecord]]:
    """Each task's (index in ``tasks``, record) as it finishes; ``task_started`` is emitted as
    each begins. ``ctx.should_stop`` is asked before each task: once it says stop, no task
    starts, the running ones finish and are yielded, then RunCancelled is raised."""
    if workers <= 1 or len(tasks) <= 1 or ctx.new_provider is None:
        for index, task in enumerate(tasks):
            ctx.check_stop()
            ctx.emit(TaskStarted(type="task_started", suite=suite.name, task_id=task["id"]))
            yield index, run_one(suite, task, ctx)
        return
    yield from _Pool(suite, tasks, ctx, min(workers, len(tasks))).results()


class _Pool:
    """Worker threads fed one task each at a time, so at most ``size`` requests are out."""

    def __init__(self, suite: Suite, tasks: list[dict[str, Any]], ctx: RunContext, size: int):
        assert ctx.new_provider is not None
        self.suite, self.ctx = suite, ctx
        self.pending = iter(enumerate(tasks))
        self.inbox: queue.Queue[tuple[int, dict[str, Any]] | None] = queue.Queue()
        self.outbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.running = 0
        self.stopped = False
        providers = [ctx.new_provider() for _ in range(size)]
        # Events from a worker's suite code go through the outbox: callbacks stay on the
        # caller's thread, as in a serial run.
        self.threads = [
            threading.Thread(
                target=self._work,
                args=(replace(ctx, provider=provider, emit=self._relay),),
                name=f"benchloop-task-{number}",
                daemon=True,
            )
            for number, provider in enumerate(providers)
        ]
        for thread in self.threads:
            thread.start()

    def _relay(self, event: RunEvent) -> None:
        self.outbox.put(("event", event))

    def _work(self, ctx: RunContext) -> None:
        try:
            while (item := self.inbox.get()) is not None:
                index, task = item
                try:
                    self.outbox.put(("done", (index, run_one(self.suite, task, ctx))))
                except BaseException as exc:  # RunCancelled from a suite's own check_stop
                    self.outbox.put(("raised", exc))
        finally:
            ctx.provider.close()

    def _start_next(self) -> None:
        """Hand out the next task, unless none is left or the run was told to stop (asked only
        when a task is left, as the serial loop asks only before a task)."""
        item = None if self.stopped else next(self.pending, None)
        if item is None:
            return
        if self.ctx.should_stop():
            self.stopped = True
            return
        task_id = item[1]["id"]
        self.ctx.emit(TaskStarted(type="task_started", suite=self.suite.name, task_id=task_id))
        self.inbox.put(item)
        self.running += 1

    def results(self) -> Iterator[tuple[int, TaskRecord]]:
        raised: BaseException | None = None
        try:
            for _ in self.threads:
                self._start_next()
            while self.running:
                kind, value = self.outbox.get()
                if kind == "event":
                    self.ctx.emit(value)
                    continue
                self.running -= 1
                if kind == "raised":
                    raised, self.stopped = raised or value, True
                    continue
                yield value
                self._start_next()
            if raised is not None:
                raise raised
            if self.stopped:
                raise RunCancelled()
        finally:
            # Interrupted (Ctrl-C) or done: no task is handed out again; a worker still in a
            # request finishes it, closes its connection and exits (daemon: it never holds
            # the process open).
            for _ in self.threads:
                self.inbox.put(None)
