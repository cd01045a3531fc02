"""Log lines that say which job, run or upload they belong to, as readthedocs' builders do.

`with log_context(job_id=7, host="gpu-1"):` binds fields for the code it wraps; `bind_log_context`
adds one once it is known (the run id, after the upload is stored) until that block ends. The
fields live in a contextvar, so each thread, Celery task and request sees its own; a thread
started inside a block sees them only if it runs in a copy of the context
(`threading.Thread(target=contextvars.copy_context().run, args=(work,))`).

`ContextFilter`, set on a handler, copies the bound fields onto every LogRecord it sees as
`record.context` (a dict); `KeyValueFormatter` prints them as `key=value` after the message and
`JsonFormatter` as the keys of one JSON object a line. `formatter(kind)` picks one by the
LOG_FORMAT setting's value. Used by the site (benchloop_site.settings.LOGGING) and the lab agent
(worker.agent.app). Pure: standard library only, no I/O of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType

LOG_FORMATS = ("text", "json")

_BOUND: ContextVar[Mapping[str, object]] = ContextVar(
    "benchloop_log_context", default=MappingProxyType({})
)


def _known(fields: Mapping[str, object]) -> dict[str, object]:
    # A field not known yet (None) is left out rather than printed as "None".
    return {key: value for key, value in fields.items() if value is not None}


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Bind `fields` to every line logged inside the block (nested blocks add to them)."""
    token = _BOUND.set(MappingProxyType({**_BOUND.get(), **_known(fields)}))
    try:
        yield
    finally:
        _BOUND.reset(token)


def bind_log_context(**fields: object) -> None:
    """Add fields until the enclosing log_context ends (outside one: for the whole context)."""
    _BOUND.set(MappingProxyType({**_BOUND.get(), **_known(fields)}))


def bound_fields() -> dict[str, object]:
    """The fields bound here and now."""
    return dict(_BOUND.get())


class ContextFilter(logging.Filter):
    """Copies the bound fields onto each record as `record.context`; lets every record pass.

    Fields a line passes itself (`extra={"context": {...}}`) win over the bound ones.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        own = getattr(record, "context", None)
        record.context = {**_BOUND.get(), **(own if isinstance(own, dict) else {})}
        return True


def _text(value: object) -> str:
    text = str(value)
    # Quoted (JSON string syntax) when it would not read back as one key=value pair.
    if not text or any(c.isspace() or c in '="' for c in text):
        return json.dumps(text, ensure_ascii=False)
    return text


class KeyValueFormatter(logging.Formatter):
    """The usual line, then ` key=value` for each bound field (before any traceback)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = getattr(record, "context", None) or {}
        return line + "".join(f" {key}={_text(value)}" for key, value in fields.items())


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the bound fields, and the
    exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in (getattr(record, "context", None) or {}).items():
            line.setdefault(key, value)  # a bound field cannot hide the message or its level
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(kind: str = "text", fmt: str | None = None) -> logging.Formatter:
    """The formatter for LOG_FORMAT `kind`; `fmt` is the text line's format (%-style)."""
    if kind == "json":
        return JsonFormatter()
    if kind == "text":
        return KeyValueFormatter(fmt)
    raise ValueError(f"LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, not {kind!r}")
