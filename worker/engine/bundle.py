"""Run bundles: atomic writer, schema validation, reader (with legacy formats) and upload view."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import tempfile
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema

from ..rules.redact import REDACTED, redact_text
from .errors import BundleWriteError, UsageError
from .legacy import from_legacy
from .paths import runs_dir, slug

BUNDLE_SCHEMA_VERSION = "1.1"
SCHEMA_PATH = Path(__file__).with_name("schemas") / "bundle-1.schema.json"
RUN_FILE = "run.json"


def new_run_id(
    model: str, *, local: bool, provider: str, client_run_id: str, when: datetime
) -> str:
    """``<UTC time>-<model>-<local|remote>-<provider>-<6 hex>``: no host names, safe to share."""
    stamp = when.strftime("%Y%m%d-%H%M%S")
    mode = "local" if local else "remote"
    return f"{stamp}-{slug(model)}-{mode}-{slug(provider)}-{client_run_id[:6]}"


def bundle_path(run_id: str, home_runs: Path | None = None) -> Path:
    return (home_runs or runs_dir()) / run_id / RUN_FILE


def write_bundle(bundle: Mapping[str, Any], path: Path) -> Path:
    """Write atomically: temp file in the same folder, fsync, then rename over the target.

    Raises BundleWriteError (an OSError) naming the bundle when the disk is full or the file
    cannot be written; the previous copy at ``path`` is then unchanged.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".run-", suffix=".json.tmp", dir=path.parent)
    except OSError as exc:
        raise BundleWriteError(path, exc) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(bundle, handle, indent=1, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise BundleWriteError(path, exc) from exc
        raise
    # Persist the rename itself; without it a power cut can leave the old file in place.
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return path


@cache
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validation_errors(bundle: Mapping[str, Any]) -> list[str]:
    """Schema violations as 'path: message' strings (empty when valid)."""
    errors = sorted(_validator().iter_errors(bundle), key=lambda e: list(e.absolute_path))
    return ["/".join(str(p) for p in e.absolute_path) + ": " + e.message for e in errors]


def validate_bundle(bundle: Mapping[str, Any]) -> None:
    errors = validation_errors(bundle)
    if errors:
        raise ValueError(f"bundle does not match bundle-1 schema: {errors[0]}")


def load_bundle(source: Path | str | dict) -> dict:
    """Read a bundle (ours, or benchloop-cli 0.2.3 / 0.3.0 run.json) into the bundle-1 shape."""
    if isinstance(source, dict):
        document = source
        origin = ""
    else:
        path = Path(source)
        if path.is_dir():
            path = path / RUN_FILE
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise UsageError(f"no run bundle at {path}") from exc
        except ValueError as exc:
            raise UsageError(f"{path} is not valid JSON: {exc}") from exc
        origin = path.parent.name
    if not isinstance(document, dict):
        raise UsageError("a run bundle must be a JSON object")
    if document.get("bundle_schema_version"):
        major = str(document["bundle_schema_version"]).split(".")[0]
        if major != BUNDLE_SCHEMA_VERSION.split(".")[0]:
            raise UsageError(
                f"bundle schema {document['bundle_schema_version']} is newer than this reader",
                hint="Upgrade benchloop.",
            )
        return document
    return from_legacy(document, folder=origin)


def list_runs(home_runs: Path | None = None) -> list[Path]:
    """Run folders holding a run.json, oldest first (names start with a UTC timestamp)."""
    root = home_runs or runs_dir()
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / RUN_FILE).is_file())


def find_run(ref: str | None, home_runs: Path | None = None) -> Path:
    """Resolve a run reference: a path, a run id, a unique id prefix, or 'latest' / None."""
    if ref:
        candidate = Path(ref).expanduser()
        if candidate.is_file():
            return candidate
        if (candidate / RUN_FILE).is_file():
            return candidate / RUN_FILE
    runs = list_runs(home_runs)
    if not ref or ref in ("latest", "last"):
        if not runs:
            raise UsageError("no runs yet", hint="Run `benchloop run --url … --model …` first.")
        return runs[-1] / RUN_FILE
    matches = [p for p in runs if p.name == ref] or [p for p in runs if p.name.startswith(ref)]
    if not matches:
        matches = [p for p in runs if ref in p.name]
    if len(matches) == 1:
        return matches[0] / RUN_FILE
    if not matches:
        raise UsageError(f"no run matches {ref!r}", hint="`benchloop list` shows the run ids.")
    raise UsageError(
        f"{ref!r} matches {len(matches)} runs; give more of the id",
        hint="`benchloop list` shows the run ids.",
    )


# ---------------------------------------------------------------- upload view

_DROP_MACHINE = ("endpoint", "remote_host")


def _is_ours(machine_id: str) -> bool:
    return bool(re.fullmatch(r"sha256:[0-9a-f]{64}", machine_id or ""))


def upload_view(bundle: dict, *, secrets: list[str] | tuple[str, ...] = ()) -> dict:
    """What may leave this machine: no endpoint address, keys, raw machine ids or model outputs.

    Dropped: ``machine.endpoint``, ``machine.remote_host``, a machine id that is not our salted
    hash (legacy MAC-derived ids), ``extras`` (legacy command lines and dashboard fields), every
    task ``output``. ``machine.backend`` keeps only the engine name (the old CLI wrote
    "<provider>:<url>" there). Any remaining string goes through the site's own redaction
    (worker.rules.redact: addresses, URLs, keys, emails, home paths) and loses the endpoint's
    host and the given secrets; model ids that are file paths keep only the file name.
    """
    view = copy.deepcopy(bundle)
    machine = view.get("machine") or {}
    endpoint = str(machine.get("endpoint") or "")
    remote_host = str(machine.get("remote_host") or "")
    for key in _DROP_MACHINE:
        machine.pop(key, None)
    if not _is_ours(str(machine.get("machine_id", ""))):
        machine.pop("machine_id", None)
    backend = str(machine.get("backend", ""))
    if ":" in backend:
        machine["backend"] = backend.split(":", 1)[0]
    view.pop("extras", None)
    model = view.get("model") or {}
    if re.search(r"[/\\]", str(model.get("model_id", ""))):
        model["model_id"] = slug(str(model["model_id"]))
    for suite in (view.get("suites") or {}).values():
        for task in suite.get("tasks") or []:
            task.pop("output", None)
    needles = [s for s in secrets if s]
    host = urlsplit(endpoint).netloc if endpoint else ""
    for value in (host, remote_host, urlsplit(endpoint).hostname or ""):
        if value and value not in ("localhost", "127.0.0.1", "::1", "[::1]"):
            needles.append(value)
    scrubbed = _scrub(view, sorted(set(needles), key=len, reverse=True))
    assert isinstance(scrubbed, dict)  # _scrub keeps each value's shape
    return scrubbed


def _scrub(value: object, needles: list[str]) -> object:
    if isinstance(value, dict):
        return {k: _scrub(v, needles) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, needles) for v in value]
    if isinstance(value, str):
        # The named secrets first: redact_text would cut a URL-shaped one into pieces.
        for needle in needles:
            value = value.replace(needle, REDACTED)
        return redact_text(value)
    return value


def export_row(bundle: dict) -> dict:
    """One flat row per run for `benchloop export` (JSON or CSV)."""
    summary = bundle.get("speed_summary") or {}

    def med(key: str) -> float | None:
        return (summary.get(key) or {}).get("median")

    return {
        "run_id": bundle.get("run_id"),
        "client_run_id": bundle.get("client_run_id"),
        "timestamp": bundle.get("timestamp"),
        "status": bundle.get("status"),
        "source_format": bundle.get("source_format", "bundle-1"),
        "model": (bundle.get("model") or {}).get("model_id"),
        "provider": bundle.get("provider"),
        "engine": (bundle.get("engine") or {}).get("name"),
        "engine_version": (bundle.get("engine") or {}).get("version"),
        "hardware_label": (bundle.get("machine") or {}).get("hardware_label"),
        "is_remote": bundle.get("is_remote"),
        "benchmark_profile": bundle.get("benchmark_profile"),
        "comparable": bundle.get("comparable"),
        "noncomparable_reasons": "; ".join(
            (bundle.get("comparability") or {}).get("reasons") or []
        ),
        "contention": (bundle.get("contention") or {}).get("status", ""),
        "model_sha256": (bundle.get("model") or {}).get("sha256", ""),
        "overall_score": bundle.get("overall_score"),
        "quality_score": bundle.get("quality_score"),
        "speed_score": bundle.get("speed_score"),
        "reliability_score": bundle.get("reliability_score"),
        "value_score": bundle.get("value_score"),
        "decode_tps_median": med("decode_tps"),
        "prefill_tps_median": med("prefill_tps"),
        "ttft_ms_median": med("ttft_ms"),
        "server_decode_tps_median": med("server_decode_tps"),
        "decode_ratio_vs_server": summary.get("decode_ratio_vs_server"),
        "speed_samples": (summary.get("decode_tps") or {}).get("n", 0),
        "manifest_hash": bundle.get("manifest_hash"),
    }
