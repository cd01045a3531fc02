"""`benchloop run`'s live display: a progress bar fed by the orchestrator's events."""

from __future__ import annotations

from rich.console import Console

# Columns of the progress line besides the task name and the bar: spinner, "117/117",
# elapsed "0:01:13", "ETA 1:02:03", "1,234.5 tok/s", and the one-space gaps between seven columns.
_REQUESTS_WIDTH, _ETA_WIDTH, _RATE_WIDTH = 7, 11, 13
_FIXED_WIDTH = 1 + _REQUESTS_WIDTH + 7 + _ETA_WIDTH + _RATE_WIDTH + 6
_MIN_BAR, _MAX_BAR = 8, 40


class RunDisplay:
    """Rich progress bar fed by orchestrator events, with an ETA and the live decode rate.

    Progress is counted in estimated work, not requests: a 2048-token prompt with a 512-token
    answer takes far longer than a short one, and an ETA over request counts would swing.
    """

    def __init__(self, console: Console, tasks: dict[str, list[dict]]):
        from rich.progress import Progress

        self.progress = Progress(*_columns(console, tasks), console=console, transient=False)
        self.costs = _work_estimates(tasks)
        self.speed_ids = {task["id"] for task in tasks.get("speed", [])}
        self.bar = None
        self.done = self.total = 0

    def __enter__(self) -> RunDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def _advance(self, task_id: str, rate: str | None = None) -> None:
        self.done += 1
        fields = {"requests": f"{self.done}/{self.total}"}
        if rate is not None:
            fields["rate"] = rate
        self.progress.update(self.bar, advance=self.costs.get(task_id, 1.0), **fields)
        task = self.progress.tasks[0]
        if task.completed and task.elapsed:
            # Elapsed per unit of work done × work left: steady, unlike a 30 s speed window.
            left = task.elapsed / task.completed * max(task.total - task.completed, 0)
            self.progress.update(self.bar, eta=f"ETA {_clock(left)}")

    def on_event(self, event: dict) -> None:
        kind = event["type"]
        if kind == "run_started":
            trials = event["speed_trials"]
            counts = event["suite_task_counts"]
            self.total = sum(n * (trials if s == "speed" else 1) for s, n in counts.items())
            work = sum(
                cost * (trials if task_id in self.speed_ids else 1)
                for task_id, cost in self.costs.items()
            )
            self.bar = self.progress.add_task(
                "warming up", total=work, rate="", eta="ETA –", requests=f"0/{self.total}"
            )
        elif self.bar is None:
            return
        elif kind == "task_started":
            self.progress.update(self.bar, description=event["task_id"])
        elif kind == "task_progress" and event.get("live_tps"):
            rate = f"{event['live_tps']:,.1f} tok/s"
            self.progress.update(self.bar, rate=rate)
        elif kind == "trial_completed":
            rate = f"{event['decode_tps']:,.1f} tok/s" if event.get("decode_tps") else "trial error"
            self._advance(event["task_id"], rate)
        elif kind == "task_completed" and event["suite"] != "speed":
            self._advance(event["task_id"])
        elif kind in ("run_completed", "run_failed"):
            self.progress.update(self.bar, description=event.get("status", "done"))


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

    def fixed(text: str, width: int, justify: str = "left") -> TextColumn:
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
            costs[task["id"]] = float(prompt_tokens + 4 * out_tokens)
    return costs


def _clock(seconds: float) -> str:
    """ "4:05", or "1:02:03" from an hour up."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
