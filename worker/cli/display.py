"""`benchloop run`'s live display: a progress bar fed by the orchestrator's events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, JustifyMethod

from worker.rules.contract import RunEvent, RunStarted

if TYPE_CHECKING:
    from rich.progress import TaskID

# Columns of the progress line besides the task name and the bar: spinner, "117/≤117",
# elapsed "0:01:13", "ETA 1:02:03", "1,234.5 tok/s", and the one-space gaps between seven columns.
_REQUESTS_WIDTH, _ETA_WIDTH, _RATE_WIDTH = 8, 11, 13
# What a trial-counted task's name carries while it runs: " 10/≤10" (trial k of up to N).
_TRIAL_SUFFIX = 7
_FIXED_WIDTH = 1 + _REQUESTS_WIDTH + 7 + _ETA_WIDTH + _RATE_WIDTH + 6
_MIN_BAR, _MAX_BAR = 8, 40
_TRIAL_SUITES = ("speed", "speed_sweep")


class RunDisplay:
    """Rich progress bar fed by orchestrator events, with an ETA and the live decode rate.

    Progress is counted in estimated work, not requests: a 2048-token prompt with a 512-token
    answer takes far longer than a short one, and an ETA over request counts would swing.
    """

    def __init__(self, console: Console, tasks: dict[str, list[dict]]):
        from rich.progress import Progress

        self.progress = Progress(*_columns(console, tasks), console=console, transient=False)
        self.costs = _work_estimates(tasks)
        # Each task's suite: tasks of _TRIAL_SUITES count in trials (a sweep's concurrency
        # cell: in rounds), the others in requests.
        self.suite_of = {task["id"]: suite for suite in tasks for task in tasks[suite]}
        self.seen: dict[str, int] = {}
        self.trials = 1
        # The speed suite's most trials a cell may take (its rule's ceiling), and whether it
        # may take fewer (an adaptive rule): then the request count is "up to" its total.
        self.speed_trials = 1
        self.adaptive = False
        self.bar: TaskID | None = None
        self.done = self.total = 0

    def __enter__(self) -> RunDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def _requests(self) -> str:
        return f"{self.done}/{'≤' if self.adaptive else ''}{self.total}"

    def _ceiling(self, suite: str) -> int:
        return self.speed_trials if suite == "speed" else self.trials

    def _advance(self, bar: TaskID, task_id: str, rate: str | None = None) -> None:
        self.done += 1
        self.progress.update(bar, advance=self.costs.get(task_id, 1.0), requests=self._requests())
        if rate is not None:
            self.progress.update(bar, rate=rate)
        task = self.progress.tasks[0]
        if task.completed and task.elapsed:
            # Elapsed per unit of work done × work left: steady, unlike a 30 s speed window.
            left = task.elapsed / task.completed * max((task.total or 0) - task.completed, 0)
            self.progress.update(bar, eta=f"ETA {_clock(left)}")

    def on_event(self, event: RunEvent) -> None:
        # Each branch tests event["type"] itself: that is what narrows the event's type.
        if event["type"] == "run_started":
            self._start(event)
        elif self.bar is None:
            return
        elif event["type"] == "task_started":
            self.progress.update(self.bar, description=event["task_id"])
        elif event["type"] == "task_progress":
            # Trial k of N, or of up to N where the cell may stop early.
            most = f"{'≤' if event.get('trials_floor', event['trials']) < event['trials'] else ''}"
            trial = f"{event['task_id']} {event['trial']}/{most}{event['trials']}"
            self.progress.update(self.bar, description=trial)
            if event["live_tps"]:
                self.progress.update(self.bar, rate=f"{event['live_tps']:,.1f} tok/s")
        elif event["type"] == "trial_completed":
            decode = event.get("decode_tps")
            rate = f"{decode:,.1f} tok/s" if decode else "trial error"
            self.seen[event["task_id"]] = self.seen.get(event["task_id"], 0) + 1
            self._advance(self.bar, event["task_id"], rate)
        elif event["type"] == "task_completed" and event["suite"] not in _TRIAL_SUITES:
            self._advance(self.bar, event["task_id"])
        elif event["type"] == "task_completed" and event["suite"] == "speed" and self.adaptive:
            # A cell that stopped before its ceiling: the trials it did not need leave the
            # total (the bar's work with them) rather than counting as done.
            task_id = event["task_id"]
            left = self._ceiling("speed") - self.seen.get(task_id, 0)
            self.total -= left
            task = self.progress.tasks[0]
            self.progress.update(
                self.bar,
                total=(task.total or 0) - left * self.costs.get(task_id, 1.0),
                requests=self._requests(),
            )
        elif event["type"] == "task_completed":
            # A sweep cell beyond the server's context ends without trials: count them done.
            for _ in range(self._ceiling(event["suite"]) - self.seen.get(event["task_id"], 0)):
                self._advance(self.bar, event["task_id"])
        elif event["type"] == "run_completed" or event["type"] == "run_failed":
            # Two comparisons, not `in`: each narrows the event to its type, whose status is a str.
            self.progress.update(self.bar, description=event.get("status", "done"))

    def _start(self, event: RunStarted) -> None:
        self.trials = event["speed_trials"]
        rule = event.get("speed_trial_rule")
        self.speed_trials = rule["ceiling"] if rule else self.trials
        self.adaptive = rule is not None and rule["floor"] < rule["ceiling"]
        counts = event["suite_task_counts"]
        per = {s: self._ceiling(s) if s in _TRIAL_SUITES else 1 for s in counts}
        self.total = sum(n * per[s] for s, n in counts.items())
        work = sum(
            cost * per.get(self.suite_of.get(task_id, ""), 1)
            for task_id, cost in self.costs.items()
        )
        self.bar = self.progress.add_task(
            "warming up", total=work, rate="", eta="ETA –", requests=self._requests()
        )


def _columns(console: Console, tasks: dict[str, list[dict]]) -> list:
    """Spinner, task, bar, requests, elapsed, ETA and rate, in the console's width.

    The task column is as wide as the longest task id, so none is cut to "speed-…"; the bar
    takes what the line has left (at least _MIN_BAR, at most _MAX_BAR).
    """
    from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    names = [
        len(task["id"]) + (_TRIAL_SUFFIX if suite in _TRIAL_SUITES else 0)
        for suite, task_list in tasks.items()
        for task in task_list
    ]
    name_width = max([*names, len("warming up")])
    bar_width = max(console.width - _FIXED_WIDTH - name_width, _MIN_BAR)
    name_width = min(name_width, max(console.width - _FIXED_WIDTH - bar_width, 8))

    def fixed(text: str, width: int, justify: JustifyMethod = "left") -> TextColumn:
        column = Column(width=width, no_wrap=True, overflow="ellipsis", justify=justify)
        return TextColumn(text, table_column=column)

    return [
        SpinnerColumn(),
        fixed("[bold]{task.description}", name_width),
        BarColumn(bar_width=min(bar_width, _MAX_BAR)),
        fixed("{task.fields[requests]}", _REQUESTS_WIDTH, "right"),
        TimeElapsedColumn(),
        fixed("{task.fields[eta]}", _ETA_WIDTH),
        fixed("{task.fields[rate]}", _RATE_WIDTH, "right"),
    ]


def _work_estimates(tasks: dict[str, list[dict]]) -> dict[str, float]:
    """Relative cost of one request per task: prompt tokens + 4 × output tokens (decoding a
    token costs several times more than prefilling one)."""
    costs = {}
    for task_list in tasks.values():
        for task in task_list:
            out_tokens = task.get("config", {}).get("max_tokens", 256)
            prompt_tokens = task.get("speed", {}).get("prompt_tokens", 200)
            sweep = task.get("sweep")
            if sweep:
                # A depth trial prefills its context too; a concurrency round runs every stream.
                out_tokens = sweep["output_tokens"] * sweep.get("streams", 1)
                prompt_tokens = (sweep["prompt_tokens"] + sweep.get("depth", 0)) * sweep.get(
                    "streams", 1
                )
            costs[task["id"]] = float(prompt_tokens + 4 * out_tokens)
    return costs


def _clock(seconds: float) -> str:
    """ "4:05", or "1:02:03" from an hour up."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
