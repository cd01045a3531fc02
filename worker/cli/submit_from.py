"""`benchloop submit --from FILE`: send the output of another tool (llama-bench, llama-benchy)
to a BenchLoop site as it is.

The site reads the file (runs.importers.external): one parser serves this command, the API
and `import_results`, and the CLI stays free of the site's code. What the CLI adds is the
machine: a file that names no hardware (llama-benchy's) takes this machine's, detected the way
`benchloop run` detects it, unless --hardware names another.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding

from worker.engine.errors import AuthError, RequestRejected, ServerError, UsageError
from worker.engine.hardware import detect_hardware
from worker.engine.site import api_key_for, site_url
from worker.engine.transport import USER_AGENT, error_message, map_transport_error
from worker.rules.hardware import gpu_summary

EXTERNAL_PATH = "/api/v1/runs/external"
# Far above any real llama-bench or llama-benchy output; the site sets the real limit (413).
MAX_FILE_BYTES = 50 * 1024 * 1024
# How much of a file is looked at for NUL bytes, which no text file holds.
_SNIFF = 8192
_INDENT = (0, 0, 0, 2)  # top, right, bottom, left


def add_options(submit: argparse.ArgumentParser) -> None:
    """`submit`'s options for a results file."""
    submit.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="send a llama-bench or llama-benchy output file instead of a run",
    )
    submit.add_argument(
        "--hardware",
        metavar="TEXT",
        help='the machine a --from file was measured on, e.g. "RTX 4090 24 GB" '
        "(default: the file's, else this machine's)",
    )


def submit_from(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Send args.from_file with a fallback machine; print each stored run and its link."""
    if problem := usage_problem(args):
        raise UsageError(problem)
    path = Path(args.from_file).expanduser()
    text = read_results_file(path)
    site = site_url(args.site)
    key = api_key_for(site)
    if args.hardware:
        hardware: dict | str = args.hardware.strip()
        source, label = "override", args.hardware.strip()
    else:
        hardware, label = this_machine()
        source = "submitter"
    size = len(text.encode())
    # Before anything is sent: the file, its size, and the site (a URL, whole on its own line).
    err.print(escape(f"Sending {path.name} ({size:,} bytes) to"), soft_wrap=True)
    err.print(escape(site), soft_wrap=True, overflow="ignore")
    body = {"filename": path.name, "content": text, "hardware": hardware, "hardware_source": source}
    code, answer = send(site, key, body, name=path.name)
    if args.json:
        record = {
            "ok": True,
            "site": site,
            "file": str(path),
            "bytes": size,
            "status_code": code,
            "created": code == 201,
            "hardware_sent": hardware,
            "hardware_sent_as": source,
            **answer,
        }
        sys.stdout.write(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        return 0
    render_answer(out, answer, path=path, machine_label=label)
    return 0


def read_results_file(path: Path) -> str:
    """The file's text; a UsageError that says what is wrong with it otherwise. Errors name
    the file by its name: a whole path would be wrapped at the terminal's width."""
    name = path.name or str(path)
    try:
        if path.is_dir():
            raise UsageError(f"{name} is a folder, not a results file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(
                f"{name} is {size / 2**20:.0f} MiB; a results file is at most "
                f"{MAX_FILE_BYTES // 2**20} MiB"
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such file: {name}") from None
    except PermissionError:
        raise UsageError(f"cannot read {name}: permission denied") from None
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    if b"\x00" in data[:_SNIFF]:
        raise UsageError(
            f"{name} is not a text file",
            hint="Pass the output of llama-bench or llama-benchy as written: JSON, JSONL, CSV, "
            "SQL or a Markdown table.",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{name} is not UTF-8 text (byte {exc.start} is not)") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors add
    if not text.strip():
        raise UsageError(f"{name} is empty")
    return text


def this_machine() -> tuple[dict, str]:
    """This machine as the site takes it ({cpu, gpu, gpu_count, vram_gb, ram_gb, os}), and its
    label, from the engine's own detection."""
    hw = detect_hardware()
    gpu, vram = gpu_summary(hw)
    machine = {
        "cpu": hw["cpu_model"],
        "gpu": gpu,
        "gpu_count": len(hw["gpus"]),
        "vram_gb": vram or None,
        "ram_gb": hw["ram_gb"],
        "os": hw["os"],
    }
    return machine, hw["label"] or hw["cpu_model"] or "unknown machine"


def send(site: str, key: str, body: dict, *, name: str, timeout: float = 120.0) -> tuple[int, dict]:
    """POST the file; (201 or 200, the site's answer). A refusal is one sentence that names
    the file and, where the site gives one, the line or field."""
    headers = {
        "Authorization": f"Bearer {key}",
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
    }
    try:
        with httpx.Client(timeout=timeout, headers=headers) as client:
            response = client.post(site + EXTERNAL_PATH, json=body)
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    if response.status_code in (200, 201):
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("runs"), list):
            raise ServerError(
                f"the site stored {name} but its answer is not what this CLI expects",
                hint="Upgrade the CLI (pip install -U benchloop) or check the site's version.",
            )
        return response.status_code, answer
    raise _refusal(response, name)


def _refusal(response: httpx.Response, name: str) -> Exception:
    code = response.status_code
    error = _error_body(response)
    message = str(error.get("message") or error_message(response)).rstrip(".")
    fields = error.get("fields") if isinstance(error.get("fields"), list) else []
    where = fields[0].get("path") if fields and isinstance(fields[0], dict) else ""
    if where and where not in ("(file)", "(body)") and where not in message:
        message += f" (at {where})"
    if code in (401, 403):
        return AuthError(
            f"the site refused the key (HTTP {code}): {message}",
            hint="Run `benchloop login --site …` again, or set $BENCHLOOP_API_KEY.",
        )
    if code == 404:
        return RequestRejected(
            f"this site does not take results files (HTTP 404 at {EXTERNAL_PATH})",
            hint="The site is older than `submit --from`; ask its operator to upgrade.",
        )
    if code >= 500:
        return ServerError(f"the site failed while storing {name} (HTTP {code}): {message}")
    if error.get("code") == "needs_hardware":
        return RequestRejected(
            f"the site cannot tell which machine {name} was measured on: {message}",
            hint='Name it with --hardware, for example --hardware "RTX 4090 24 GB".',
        )
    if code == 413:
        return RequestRejected(f"{name} is too large for the site: {message}", hint="")
    return RequestRejected(f"the site could not read {name}: {message}", hint="")


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


# ------------------------------------------------------------------------------------ output


def render_answer(out: Console, answer: dict, *, path: Path, machine_label: str) -> None:
    """One line per run (method, stack, machine, status), where its machine came from, and
    its link whole on a line of its own (a wrapped URL cannot be opened)."""
    runs = [run for run in answer["runs"] if isinstance(run, dict)]
    new = sum(1 for run in runs if not run.get("duplicate"))
    if new == len(runs):
        head = f"Stored {_count(len(runs))} from {path.name}:"
    elif new:
        head = f"Stored {_count(new)} from {path.name}; {len(runs) - new} were on the site already:"
    else:
        head = f"{path.name} is on the site already ({_count(len(runs))}):"
    out.print(escape(head))
    waiting = False
    for run in runs:
        status = _status(run)
        waiting = waiting or run.get("status") in ("pending", "flagged")
        hardware = run.get("hardware") or "unknown hardware"
        line = f"run {run.get('id')}, {run.get('method')}: {run.get('stack')}, on {hardware}"
        out.print(escape(f"{line} — {status}"))
        _indented(out, hardware_note(run.get("hardware_source", ""), machine_label))
        cells = [str(cell) for cell in run.get("cells") or []]
        if cells:
            _indented(out, f"cells: {', '.join(cells)}")
        if run.get("url"):
            out.print(escape(str(run["url"])), soft_wrap=True, overflow="ignore")
    if waiting:
        out.print("Pending and flagged runs reach the leaderboard once a moderator approves them.")


def _indented(out: Console, text: str) -> None:
    """A line under a run's, indented with its wrapped parts: each run reads as one block."""
    out.print(Padding(escape(text), _INDENT, expand=False))


def hardware_note(source: str, machine_label: str) -> str:
    """Where a run's machine came from, in words."""
    if source == "file":
        return "hardware: from the file"
    if source == "override":
        return "hardware: as given by --hardware"
    if source == "submitter":
        return (
            f"hardware: this machine's ({machine_label}), since the file names none — "
            "pass --hardware to say otherwise"
        )
    return f"hardware: {source or 'unknown'}"


def _status(run: dict) -> str:
    status = run.get("status")
    if run.get("published"):
        text = "published"
    elif status == "pending":
        text = "pending review"
    elif status == "flagged":
        reasons = "; ".join(str(r) for r in run.get("flag_reasons") or [])
        text = "flagged for review" + (f": {reasons}" if reasons else "")
    elif status == "approved":
        text = "approved, not on the leaderboard"
    else:
        text = str(status)
    return text + (" (already on the site)" if run.get("duplicate") else "")


def _count(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def usage_problem(args: argparse.Namespace) -> str:
    """Why these submit options do not go together; "" when they do."""
    if args.from_file and args.run:
        return "give a run or --from FILE, not both"
    if args.hardware and not args.from_file:
        return "--hardware names the machine of a --from file; a run bundle records its own"
    if args.from_file and args.allow_incomplete:
        return "--allow-incomplete is for run bundles, not --from files"
    return ""
