"""Format-neutral records that every importer produces, and checked field access for them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, overload

from runs import bounds
from runs.methods import DEFAULT_METHOD
from worker.rules.scoring import is_speed_only

MAX_STRING = 2000
# A JSON object as read: its values are checked where they are used (Node), not here.
JsonObject = dict[str, Any]


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def load_json(text: str, *, position: str) -> object:
    """Strict JSON (no NaN or Infinity) that a database can store whole (runs.bounds.json_problem);
    `position` formats {line} and {column} of a syntax error."""
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise FormatError(
            "" if "{" in position else position, "nests too deeply to parse"
        ) from None
    except json.JSONDecodeError as exc:
        where = position.format(line=exc.lineno, column=exc.colno)
        raise FormatError(where, f"invalid JSON: {exc.msg}") from None
    except ValueError as exc:
        # parse_constant does not say where the constant was; keep only a fixed position.
        raise FormatError("" if "{" in position else position, str(exc)) from None
    if isinstance(document, dict | list):
        # NUL and lone surrogates can only come from \u escapes: without one, strings are fine.
        problem, path = bounds.json_problem(document, escapes="\\u" in text)
        if problem:
            # A JSONL line's position ("line 3") says which document the path is in.
            raise Unstorable(path if "{" in position else f"{position}: {path}", problem)
    return document


class JsonText(str):
    """A JSON document already serialised, stored as it is: parser processes send payloads
    and task metadata this way, since a string crosses a process boundary far faster than
    the dicts it encodes and needs no second json.dumps to be written."""

    @classmethod
    def of(cls, value: Any) -> JsonText:
        return value if isinstance(value, JsonText) else cls(json.dumps(value))

    def load(self) -> Any:
        return json.loads(self)


def as_json_value(value: Any) -> Any:
    """The parsed value of a JSON field that may hold JsonText."""
    return value.load() if isinstance(value, JsonText) else value


class FormatError(ValueError):
    """A file that cannot be imported; `position` says where (a JSON path or a line)."""

    def __init__(self, position: str, message: str) -> None:
        super().__init__(f"{position}: {message}" if position else message)
        self.position = position
        self.message = message


class Unstorable(FormatError):
    """Well-formed JSON that holds what no database can store; `position` is its JSON path."""


@dataclass
class SampleRecord:
    trial_index: int
    is_warmup: bool = False
    ttft_ms: float | None = None
    prefill_tps: float | None = None
    decode_tps: float | None = None
    total_latency_ms: float | None = None
    tokens_generated: int | None = None
    tokens_prompt: int | None = None


@dataclass
class ImportedTask:
    """A task as an importer read it, ready to store (the bundle's own task is
    worker.rules.contract.TaskRecord)."""

    task_id: str
    passed: bool = False
    score: float | None = None
    latency_ms: float | None = None
    tokens_generated: int | None = None
    tokens_prompt: int | None = None
    execution_ok: bool | None = None
    finish_reason: str = ""
    error: str = ""
    output: str = ""
    metadata: JsonObject | JsonText = field(default_factory=dict)
    samples: list[SampleRecord] = field(default_factory=list)


@dataclass
class ImportedSuite:
    """A suite as an importer read it, ready to store (the bundle's own suite is
    worker.rules.contract.SuiteRecord)."""

    suite: str
    score: float | None = None
    task_count: int = 0
    pass_count: int = 0
    fail_count: int = 0
    median_latency_ms: float | None = None
    tasks: list[ImportedTask] = field(default_factory=list)


@dataclass
class HardwareRecord:
    cpu: str = ""
    gpu: str = ""
    gpu_count: int = 1
    vram_gb: float | None = None
    ram_gb: float | None = None
    os_name: str = ""
    memory_channels: int | None = None


@dataclass
class RunRecord:
    """Everything one imported run carries, independent of the format it came in."""

    source_format: str
    started_at: datetime
    model_id: str
    score_scale: str
    client_run_id: str = ""
    quantization: str = ""
    model_sha256: str = ""
    engine: str = "openai-compatible"
    engine_version: str = ""
    provider: str = ""
    harness: str = "raw"
    harness_version: str = ""
    context_length: int | None = None
    kv_cache_type: str = ""
    draft_model: str = ""
    launch_settings: JsonObject = field(default_factory=dict)
    hardware: HardwareRecord | None = None
    scoring_mode: str = "local"
    benchmark_id: str = "benchloop"
    benchmark_version: str = ""
    # The speed method's version the bundle declares (speed_method_version); "" when it
    # declares none (runs.methods.speed_version then decides from the format).
    speed_version: str = ""
    profile: str = ""
    requested_profile: str = ""
    score_schema_version: str = ""
    manifest_hash: str = ""
    coverage_score: float | None = None
    comparable: bool = False
    # Why the run is not comparable (empty when it is): shown beside the run.
    noncomparable_reasons: list[str] = field(default_factory=list)
    # Load on the measuring machine: the bundle's `contention` block and its status, "clear",
    # "contended" or "unknown" ("" when the run recorded none). A contended run is not verified.
    contention: JsonObject = field(default_factory=dict)
    contention_status: str = ""
    overall_score: float | None = None
    quality_score: float | None = None
    speed_score: float | None = None
    reliability_score: float | None = None
    value_score: float | None = None
    speed: dict[str, float | None] = field(default_factory=dict)
    speed_sample_count: int | None = None
    total_runtime_sec: float | None = None
    command_used: str = ""
    outcome: str = "complete"
    error: str = ""
    visibility: str = "public"
    submitter_name: str = ""
    suites: list[ImportedSuite] = field(default_factory=list)
    raw_payload: JsonObject | JsonText = field(default_factory=dict)
    # The input path of a value read from somewhere other than its own field (a context
    # length parsed out of command_used), so that an error about it names what was sent.
    sources: dict[str, str] = field(default_factory=dict)
    # How the speeds were measured (runs.methods), and for a measurement we did not make,
    # where it came from: source, repository, commit, path, row id, licence, repeats.
    method: str = DEFAULT_METHOD
    provenance: JsonObject = field(default_factory=dict)
    # Where the hardware came from: "file" (the file named it), "submitter" (the machine that
    # ran `benchloop submit --from`), "override" (--hardware); "" for our own bundles.
    hardware_source: str = ""


def settle_scale(record: RunRecord) -> RunRecord:
    """One rule for every importer: a run without a quality suite is speed-only, and a
    speed-only run has no quality, overall or value score (the old CLIs wrote a quality of 0
    and an overall score for them)."""
    if (
        record.score_scale in ("v2", "v3")
        and record.suites
        and is_speed_only(s.suite for s in record.suites)
    ):
        record.score_scale = "speed"
    if record.score_scale == "speed":
        record.quality_score = record.overall_score = record.value_score = None
    return record


class Node:
    """A JSON value with its path, so every type error names exactly where it is.

    The path is worked out only when an error needs it: a bundle has hundreds of fields and
    almost never an error, so building every child's path string up front was a third of the
    parse time.
    """

    __slots__ = ("value", "_path", "_parent", "_key")

    def __init__(
        self, value: Any, path: str = "", *, parent: Node | None = None, key: str | int = ""
    ) -> None:
        self.value = value
        self._path = path
        self._parent = parent
        self._key = key

    @property
    def path(self) -> str:
        if self._parent is None:
            return self._path
        return self._parent._child_path(self._key)

    def fail(self, message: str) -> FormatError:
        return FormatError(self.path or "(top level)", message)

    def _child_path(self, key: str | int) -> str:
        path = self.path
        if isinstance(key, int):
            return f"{path}[{key}]"
        return f"{path}.{key}" if path else key

    def obj(self) -> JsonObject:
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, got {_kind(self.value)}")
        return self.value

    def has(self, key: str) -> bool:
        return key in self.obj()

    def get(self, key: str, *, required: bool = True) -> Node:
        data = self.value if isinstance(self.value, dict) else self.obj()
        if key not in data:
            if required:
                raise FormatError(self._child_path(key), "is missing")
            return Node(None, parent=self, key=key)
        return Node(data[key], parent=self, key=key)

    def items(self) -> list[tuple[str, Node]]:
        return [(k, Node(v, parent=self, key=k)) for k, v in self.obj().items()]

    def list(self) -> list[Node]:
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {_kind(self.value)}")
        return [Node(v, parent=self, key=i) for i, v in enumerate(self.value)]

    def str(
        self, *, default: str = "", max_length: int = MAX_STRING, kind: str = bounds.NAME
    ) -> str:
        """A string of at most `max_length` characters that the rules for `kind` allow (a
        one-line name unless said otherwise: see runs.bounds)."""
        if self.value is None:
            return default
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, got {_kind(self.value)}")
        if len(self.value) > max_length:
            raise self.fail(f"string longer than {max_length} characters")
        problem = bounds.text_problem(self.value, kind)
        if problem:
            raise self.fail(problem)
        return self.value

    @overload
    def num(
        self,
        *,
        optional: Literal[False],
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float: ...

    @overload
    def num(
        self, *, optional: bool = True, minimum: float | None = None, maximum: float | None = None
    ) -> float | None: ...

    def num(
        self, *, optional: bool = True, minimum: float | None = None, maximum: float | None = None
    ) -> float | None:
        """The number, or None when absent and `optional` (then never None)."""
        if self.value is None:
            if optional:
                return None
            raise self.fail("is required")
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self.fail(f"expected a number, got {_kind(self.value)}")
        try:
            number = float(self.value)
        except OverflowError:  # an integer of hundreds of digits
            raise self.fail("is too large a number") from None
        if not math.isfinite(number):
            raise self.fail("must be a finite number")
        if minimum is not None and number < minimum:
            raise self.fail(f"must be ≥ {minimum:g}, got {number:g}")
        if maximum is not None and number > maximum:
            raise self.fail(f"must be ≤ {maximum:g}, got {number:g}")
        return number

    def score(self) -> float | None:
        return self.num(minimum=0, maximum=100)

    @overload
    def int(self, *, optional: Literal[False], minimum: int = 0) -> int: ...

    @overload
    def int(self, *, optional: bool = True, minimum: int = 0) -> int | None: ...

    def int(self, *, optional: bool = True, minimum: int = 0) -> int | None:
        """The whole number, or None when absent and `optional` (then never None)."""
        number = self.num(optional=optional, minimum=minimum)
        if number is None:
            return None
        if number != int(number):
            raise self.fail(f"expected a whole number, got {number:g}")
        return int(number)

    def bool(self, *, default: bool | None = False) -> bool | None:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {_kind(self.value)}")
        return self.value

    def timestamp(self) -> datetime:
        text = self.str()
        if not text:
            raise self.fail("timestamp is missing")
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise self.fail(f"not an ISO-8601 timestamp: {text[:40]!r}") from exc
        if moment.tzinfo is None:
            # The speed probe and leaderboard-v1 wrote naive UTC times.
            moment = moment.replace(tzinfo=UTC)
        problem = bounds.moment_problem(moment)
        if problem:
            raise self.fail(f"timestamp {problem}")
        return moment


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
