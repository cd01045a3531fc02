"""`benchloop list`: the run bundles on this machine, newest first, with a short id for each."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.text import Text

from worker.cli.formatting import fit, say
from worker.engine.bundle import RUN_FILE, list_runs, load_bundle
from worker.engine.errors import EngineError, UsageError
from worker.engine.paths import runs_dir

SUBMISSION_FILE = "submission.json"
# Beside run.json while `benchloop run` runs: its pid and host, so `list` can say "running".
RUNNING_FILE = "running.json"
# A bundle with no end, no marker and untouched this long is not running (each task rewrites it).
_QUIET_S = 15 * 60
_HEADERS = ("id", "date (UTC)", "profile", "tasks", "status", "on the site")
_RIGHT = {"tasks"}
# An id cell wider than this goes on a line of its own.
_MAX_ID = 12


def short_refs(names: list[str]) -> dict[str, str]:
    """For each run folder, the shortest reference `find_run` resolves to it alone.

    That is the id's random tail (``…-adb8f4``) when no folder is named it, none starts with
    it and only this one contains it (find_run tries those three in that order), else the id.
    """
    refs = {}
    for name in names:
        tail = name.rsplit("-", 1)[-1]
        unique = (
            re.fullmatch(r"[0-9a-f]{6,}", tail)
            and tail != name
            and not any(other.startswith(tail) for other in names)
            and sum(tail in other for other in names) == 1
        )
        refs[name] = tail if unique else name
    return refs


def _submission(folder: Path) -> dict | None:
    path = folder / SUBMISSION_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _uploaded(record: dict | None) -> str:
    """What the site last said of the run (when sent, or when `list` last asked it): 'no' if
    it was never sent."""
    if record is None:
        return "no"
    seen = record.get("last_seen")
    if isinstance(seen, dict):
        return (
            "not on the site"
            if seen.get("gone")
            else _state_words(seen.get("review"), seen.get("published"))
        )
    return _state_words(record.get("review"), record.get("published"))


def _when_seen(record: dict | None) -> object:
    seen = (record or {}).get("last_seen")
    return seen.get("at") if isinstance(seen, dict) else (record or {}).get("submitted_at")


def _remember(row: dict, state: dict | None) -> None:
    """Keep what the site said in submission.json, for `list` to show when it cannot ask."""
    path = Path(row["path"]).parent / SUBMISSION_FILE
    record = _submission(path.parent)
    if not record:
        return
    record["last_seen"] = {
        "review": (state or {}).get("status"),
        "published": (state or {}).get("published"),
        "gone": state is None,
        "at": datetime.now(UTC).isoformat(),
    }
    # A read-only folder: the state is still shown, just not remembered.
    with contextlib.suppress(OSError):
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _state_words(review: object, published: object) -> str:
    if review in ("pending", "flagged"):
        return "pending review"
    if published:
        return "published"
    if review == "approved":
        return "approved, unlisted"
    return str(review) if isinstance(review, str) and review else "sent"


def mark_running(folder: Path) -> Path | None:
    """Say this process is running the run in ``folder`` (removed when it ends); None when the
    marker cannot be written (a full disk is the run's to report, not the marker's)."""
    marker = folder / RUNNING_FILE
    try:
        marker.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n")
    except OSError:
        marker.unlink(missing_ok=True)  # created, then the write failed: leave no empty file
        return None
    return marker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_running(folder: Path, bundle: dict) -> bool:
    """A run with no end recorded whose process is alive (or, run by another program that
    leaves no marker, whose bundle was rewritten lately)."""
    if bundle.get("finished_at") or bundle.get("error") or bundle.get("status") != "incomplete":
        return False
    try:
        marker = json.loads((folder / RUNNING_FILE).read_text(encoding="utf-8"))
        pid, host = int(marker["pid"]), marker.get("host")
    except (OSError, ValueError, KeyError, TypeError):
        pid, host = None, None
    if pid is not None and host == socket.gethostname():
        return _alive(pid)
    try:
        return time.time() - (folder / RUN_FILE).stat().st_mtime < _QUIET_S
    except OSError:
        return False


def _date(timestamp: object) -> str:
    try:
        when = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return "–"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _stamp_from_name(name: str) -> str | None:
    """The UTC time a run id starts with (``20261201-173609-…``), as ISO 8601."""
    found = re.match(r"(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})", name)
    if not found:
        return None
    year, month, day, hour, minute, second = found.groups()
    return f"{year}-{month}-{day}T{hour}:{minute}:{second}+00:00"


def _row(folder: Path, ref: str) -> dict:
    row: dict[str, object] = {"id": folder.name, "ref": ref, "path": str(folder / RUN_FILE)}
    record = _submission(folder)
    row |= {"uploaded": record is not None, "site_answer": _uploaded(record)}
    row |= {k: (record or {}).get(k) for k in ("url", "site", "submitted_at")}
    row["seen_at"] = _when_seen(record)
    # Until `list` asks the site, its state is what the upload was answered.
    row["site_state"] = "last known" if record is not None else None
    try:
        bundle = load_bundle(folder / RUN_FILE)
    except UsageError as exc:
        stamp = _stamp_from_name(folder.name)
        error = exc.message.replace(str(folder / RUN_FILE), RUN_FILE)
        return row | {"status": "unreadable", "error": error, "timestamp": stamp}
    model, engine = bundle.get("model") or {}, bundle.get("engine") or {}
    comparability = bundle.get("comparability") or {}
    running = _is_running(folder, bundle)
    return row | {
        "run_id": bundle.get("run_id"),
        "timestamp": bundle.get("timestamp"),
        "finished_at": bundle.get("finished_at"),
        "status": "running" if running else bundle.get("status") or "–",
        "model": model.get("model_id"),
        "quantization": model.get("quantization") or None,
        "engine": engine.get("name"),
        "engine_version": engine.get("version"),
        "hardware_label": (bundle.get("machine") or {}).get("hardware_label"),
        "profile": bundle.get("benchmark_profile") or bundle.get("requested_profile"),
        # Bundles of the earlier CLI record no expected count: the tasks they hold, then.
        "tasks_scored": comparability.get(
            "tasks_scored",
            sum(len(s.get("tasks") or []) for s in (bundle.get("suites") or {}).values()),
        ),
        "tasks_expected": comparability.get("tasks_expected"),
        "comparable": bundle.get("comparable"),
        "client_run_id": bundle.get("client_run_id"),
    }


def list_rows(home_runs: Path | None = None) -> list[dict]:
    """Every run bundle under ``home_runs`` (default: this user's), newest first."""
    folders = list_runs(home_runs)
    refs = short_refs([f.name for f in folders])
    rows = [_row(folder, refs[folder.name]) for folder in folders]
    rows.sort(key=lambda r: (str(r.get("timestamp") or ""), r["id"]), reverse=True)
    return rows


def _site_run_id(url: object) -> int | None:
    found = re.search(r"/runs/(\d+)/?$", url) if isinstance(url, str) else None
    return int(found.group(1)) if found else None


def ask_site(rows: list[dict], *, timeout: float = 5.0) -> None:
    """Each sent run's state as its site says it now; where the site cannot be asked, what it
    last answered, with the date ("last known: pending review (2026-12-04)")."""
    from worker.engine.site import api_key_for, run_state

    unreachable: set[str] = set()
    for row in rows:
        site, run_id = row.get("site"), _site_run_id(row.get("url"))
        if not row["uploaded"]:
            continue
        if isinstance(site, str) and run_id is not None and site not in unreachable:
            try:
                state = run_state(site, api_key_for(site), run_id, timeout=timeout)
            except EngineError as exc:
                if exc.kind in ("unreachable", "timeout"):
                    unreachable.add(site)
            else:
                row["site_state"] = "now"
                row["site_answer"] = (
                    "not on the site"
                    if state is None
                    else _state_words(state.get("status"), state.get("published"))
                )
                _remember(row, state)
                continue
        when = _date(row.get("seen_at"))[:10]
        row["site_answer"] = f"last known: {row['site_answer']}" + (
            f" ({when})" if when != "–" else ""
        )


def next_unsent(*, allow_incomplete: bool = False, home_runs: Path | None = None) -> Path | None:
    """The newest finished run (by when it finished) that was never sent, or None."""
    best: tuple[str, Path] | None = None
    for folder in list_runs(home_runs):
        if (folder / SUBMISSION_FILE).exists():
            continue
        try:
            bundle = load_bundle(folder / RUN_FILE)
        except UsageError:
            continue
        if _is_running(folder, bundle):
            continue
        if bundle.get("status") != "complete" and not allow_incomplete:
            continue
        if bundle.get("status") == "incomplete" and not (
            bundle.get("finished_at") or bundle.get("error")
        ):
            continue  # never ended: killed, or still running elsewhere
        ended = str(bundle.get("finished_at") or bundle.get("timestamp") or "")
        if best is None or (ended, folder.name) > (best[0], best[1].name):
            best = (ended, folder)
    return best[1] / RUN_FILE if best else None


def _cells(row: dict) -> tuple[str, ...]:
    scored, expected = row.get("tasks_scored"), row.get("tasks_expected")
    tasks = f"{scored} of {expected}" if scored is not None and expected else str(scored or "–")
    return (
        row["ref"],
        _date(row.get("timestamp")),
        str(row.get("profile") or "–"),
        tasks,
        str(row["status"]),
        row["site_answer"],
    )


def _stack(row: dict) -> str:
    if row["status"] == "unreadable":
        return row["error"]
    model = " ".join(str(v) for v in (row.get("model"), row.get("quantization")) if v)
    engine = " ".join(str(v) for v in (row.get("engine"), row.get("engine_version")) if v)
    return " · ".join(v for v in (model, engine, row.get("hardware_label")) if v) or "–"


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    parts = [
        cell.rjust(width) if header in _RIGHT else cell.ljust(width)
        for cell, width, header in zip(cells, widths, _HEADERS, strict=True)
    ]
    return "  ".join(parts).rstrip()


def render_list(out: Console, rows: list[dict], folder: Path | None = None) -> None:
    """Two lines a run: id, date, profile, tasks, status, upload; then model, engine, machine."""
    # Paths are printed whole, on a line of their own: cut or broken, they could not be pasted.
    where = Text(f"bundles in:\n{folder or runs_dir()}", style="dim")
    if not rows:
        say(out, "No runs yet. Start one with `benchloop run` (see `benchloop run --help`).")
        out.print(where, soft_wrap=True)
        return
    cells = [_cells(row) for row in rows]
    # A long id (no short one resolves to its run) gets a line of its own above its row.
    shown = [("" if len(c[0]) > _MAX_ID else c[0], *c[1:]) for c in cells]
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(_HEADERS)]
    indent = " " * (widths[0] + 2)
    plural = "s" if len(rows) != 1 else ""
    say(out, f"{len(rows)} run{plural} on this machine, newest first", style="bold")
    out.print(Text(_line(_HEADERS, widths), style="bold"), soft_wrap=True)
    for row, full, short in zip(rows, cells, shown, strict=True):
        if full[0] != short[0]:
            out.print(Text(full[0]), soft_wrap=True)
        line = _line(short, widths)
        if len(line) > out.width:
            # A long site state ("last known: … (date)") goes under the row, not past the edge.
            line = _line((*short[:-1], ""), widths)
            out.print(Text(line), soft_wrap=True)
            say(out, f"site: {short[-1]}", indent=indent + "  ", first=indent)
        else:
            out.print(Text(line), soft_wrap=True)
        for line in fit(_stack(row), out.width, indent=indent):
            out.print(Text(line, style="dim"), soft_wrap=True)
    say(out, "An id works wherever a run is asked for: `benchloop compare ID ID`,", style="dim")
    say(out, "`benchloop submit ID`. Full ids and paths: `benchloop list --json`.", style="dim")
    out.print(where, soft_wrap=True)
