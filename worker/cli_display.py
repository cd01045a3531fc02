"""`benchloop run`'s live display: a progress bar fed by the orchestrator's events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, JustifyMethod

from worker.contract import RunEvent, RunStarted

if TYPE_CHECKING:
    from rich.progress import TaskID

# Columns of the progress line besides the task name and the bar: spinner, "117/117",
# elapsed "0:01:13", "ETA 1:02:03", "1,234.5 tok/s", and the one-space gaps between seven columns.
_REQUESTS_WIDTH, _ETA_WIDTH, _RATE_WIDTH = 7, 11, 13
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
        # Tasks counted in trials (a sweep's concurrency cell: in rounds), not in requests.
        self.speed_ids = {task["id"] for suite in _TRIAL_SUITES for task in tasks.get(suite, [])}
        self.seen: dict[str, int] = {}
        self.trials = 1
        self.bar: TaskID | None = None
        self.done = self.total = 0

    def __enter__(self) -> RunDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def _advance(self, bar: TaskID, task_id: str, rate: str | None = None) -> None:
        self.done += 1
        requests = f"{self.done}/{self.total}"
        self.progress.update(bar, advance=self.costs.get(task_id, 1.0), requests=requests)
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
        elif event["type"] == "task_progress" and event["live_tps"]:
            self.progress.update(self.bar, rate=f"{event['live_tps']:,.1f} tok/s")
        elif event["type"] == "trial_completed":
            decode = event.get("decode_tps")
            rate = f"{decode:,.1f} tok/s" if decode else "trial error"
            self.seen[event["task_id"]] = self.seen.get(event["task_id"], 0) + 1
            self._advance(self.bar, event["task_id"], rate)
        elif event["type"] == "task_completed" and event["suite"] not in _TRIAL_SUITES:
            self._advance(self.bar, event["task_id"])
        elif event["type"] == "task_completed":
            # A sweep cell beyond the server's context ends without trials: count them done.
            for _ in range(self.trials - self.seen.get(event["task_id"], 0)):
                self._advance(self.bar, event["task_id"])
        elif event["type"] in ("run_completed", "run_failed"):
            self.progress.update(self.bar, description=event.get("status", "done"))

    def _start(self, event: RunStarted) -> None:
        trials = self.trials = event["speed_trials"]
        counts = event["suite_task_counts"]
        self.total = sum(n * (trials if s in _TRIAL_SUITES else 1) for s, n in counts.items())
        work = sum(
            cost * (trials if task_id in self.speed_ids else 1)
            for task_id, cost in self.costs.items()
        )
        self.bar = self.progress.add_task(
            "warming up", total=work, rate="", eta="ETA –", requests=f"0/{self.total}"
        )


def _columns(console: Console, tasks: dict[str, list[dict]]) -> list:
    """Spinner, task, bar, requests, elapsed, ETA and rate, in the console's width.

    The task column is as wide as the longest task id, so none is cut to "speed-…"; the bar
    takes what the line has left (at least _MIN_BAR, at most _MAX_BAR).
    """
    from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    names = [task["id"] for task_list in tasks.values() for task in task_list]
    name_width = max([len(name) for name in names] + [len("warming up")])
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
