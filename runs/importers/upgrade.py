"""The upgrader chain: every historical run format becomes bundle schema 1 before parsing.

v2 run.json → v3 run.json → bundle 1; the v3 publish envelope and the failed-run record enter
the chain at v3. Upgraders copy, never modify their input: stored payloads keep their original
shape and are upgraded again on every read.
"""

from __future__ import annotations

from runs.importers.records import FormatError

CURRENT_BUNDLE_MAJOR = "1"
KNOWN_SCORE_MAJORS = {"2", "3"}
LEGACY_SCORE_SCHEMA = "2.0.0"


class UnsupportedVersion(FormatError):
    """A newer major version than this server understands (HTTP 422, not 400)."""


def detect_run_format(data: dict) -> str:
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


def check_versions(data: dict) -> None:
    """Refuse majors we do not know, before any other validation, so clients see 422."""
    body = data.get("run") if isinstance(data.get("run"), dict) else data
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


def v2_to_v3(run: dict) -> dict:
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


def envelope_to_v3(envelope: dict) -> tuple[dict, str]:
    out = dict(envelope["run"])
    if "source_run_id" in out and "run_id" not in out:
        out["run_id"] = out["source_run_id"]
    return out, envelope.get("visibility", "public")


def v3_to_bundle(run: dict) -> dict:
    out = dict(run)
    out["bundle_schema_version"] = f"{CURRENT_BUNDLE_MAJOR}.0"
    out.setdefault("client_run_id", out.get("run_id") or out.get("source_run_id") or "")
    out.setdefault("status", "complete")
    return out


def upgrade(data: dict) -> tuple[dict, str, str]:
    """(bundle-1 dict, original format, visibility) for any supported run payload."""
    check_versions(data)
    kind = detect_run_format(data)
    visibility = "public"
    if kind == "bundle-1":
        return dict(data), kind, data.get("visibility", "public")
    if kind == "envelope-v3":
        run, visibility = envelope_to_v3(data)
        if "score_schema_version" not in run:
            run = v2_to_v3(run)
        return v3_to_bundle(run), kind, visibility
    run = v2_to_v3(data) if kind == "run-v2" else data
    return v3_to_bundle(run), kind, visibility
