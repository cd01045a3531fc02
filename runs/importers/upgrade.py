"""The upgrader chain: every historical run format becomes bundle schema 1 before parsing.

v2 run.json → v3 run.json → bundle 1; the v3 publish envelope and the failed-run record enter
the chain at v3. Upgraders copy, never modify their input: stored payloads keep their original
shape and are upgraded again on every read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runs.importers.records import FormatError, JsonObject

RunFormat = Literal["bundle-1", "envelope-v3", "failed-v3", "run-v3", "run-v2"]
Visibility = Literal["public", "unlisted", "private"]

CURRENT_BUNDLE_MAJOR = "1"
KNOWN_SCORE_MAJORS = {"2", "3"}
LEGACY_SCORE_SCHEMA = "2.0.0"


class UnsupportedVersion(FormatError):
    """A newer major version than this server understands (HTTP 422, not 400)."""


@dataclass(frozen=True)
class UpgradedRun:
    """A run payload brought to bundle schema 1: the bundle, the format it was sent in, and
    the visibility it asked for (anything unknown is public)."""

    bundle: JsonObject
    original_format: RunFormat
    visibility: Visibility


def detect_run_format(data: JsonObject) -> RunFormat:
    if "bundle_schema_version" in data:
        return "bundle-1"
    if isinstance(data.get("run"), dict):
        return "envelope-v3"
    if data.get("status") == "failed":
        return "failed-v3"
    if "score_schema_version" in data or "benchmark_version" in data:
        return "run-v3"
    if "suites" in data and "model" in data:
        return "run-v2"
    raise FormatError("(top level)", "unrecognised format (not a run, envelope or bundle)")


def check_versions(data: JsonObject) -> None:
    """Refuse majors we do not know, before any other validation, so clients see 422."""
    run = data.get("run")
    body: JsonObject = run if isinstance(run, dict) else data
    # Only a well-formed but unknown major is "unsupported"; malformed values fail the schema.
    bundle = _major(body.get("bundle_schema_version"))
    if bundle is not None and bundle != CURRENT_BUNDLE_MAJOR:
        raise UnsupportedVersion(
            "bundle_schema_version", f"unknown bundle schema major version {bundle!r}"
        )
    score = _major(body.get("score_schema_version"))
    if score is not None and score not in KNOWN_SCORE_MAJORS:
        raise UnsupportedVersion(
            "score_schema_version", f"unknown score schema version {body['score_schema_version']!r}"
        )


def _major(version: object) -> str | None:
    if not isinstance(version, str):
        return None
    major = version.split(".")[0]
    return major if major.isdigit() and len(major) < 6 else None


# Each step sets top-level keys only, so a shallow copy is enough to leave the caller's document
# as it was: nothing downstream writes into the nested parts (test_upgrade_leaves_input.py).


def v2_to_v3(run: JsonObject) -> JsonObject:
    out = dict(run)
    out.setdefault("benchmark_id", "benchloop")
    out.setdefault("benchmark_version", "legacy")
    out.setdefault("benchmark_profile", "")
    out.setdefault("requested_profile", "")
    out.setdefault("manifest_hash", "")
    out.setdefault("comparable", False)
    # v2 files carry no score schema; name their scale explicitly from here on.
    out["score_schema_version"] = out.get("score_schema_version") or LEGACY_SCORE_SCHEMA
    return out


def envelope_to_v3(envelope: JsonObject) -> JsonObject:
    out = dict(envelope["run"])
    if "source_run_id" in out and "run_id" not in out:
        out["run_id"] = out["source_run_id"]
    return out


def v3_to_bundle(run: JsonObject) -> JsonObject:
    out = dict(run)
    out["bundle_schema_version"] = f"{CURRENT_BUNDLE_MAJOR}.0"
    out.setdefault("client_run_id", out.get("run_id") or out.get("source_run_id") or "")
    out.setdefault("status", "complete")
    return out


def settle_visibility(value: object) -> Visibility:
    """The visibility a payload asked for, or public when it named none we know."""
    if value == "unlisted":
        return "unlisted"
    if value == "private":
        return "private"
    return "public"


def upgrade(data: JsonObject) -> UpgradedRun:
    """Any supported run payload as bundle 1, with its original format and visibility."""
    check_versions(data)
    kind = detect_run_format(data)
    if kind == "bundle-1":
        return UpgradedRun(dict(data), kind, settle_visibility(data.get("visibility")))
    if kind == "envelope-v3":
        run = envelope_to_v3(data)
        if "score_schema_version" not in run:
            run = v2_to_v3(run)
        return UpgradedRun(v3_to_bundle(run), kind, settle_visibility(data.get("visibility")))
    run = v2_to_v3(data) if kind == "run-v2" else data
    return UpgradedRun(v3_to_bundle(run), kind, "public")
