"""Log lines carry the ids bound around the work they are about (worker.rules.logcontext), as
key=value after the message or as JSON lines; the lab agent's Celery handlers print them."""

from __future__ import annotations

import contextvars
import importlib
import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from worker.rules.logcontext import (
    ContextFilter,
    JsonFormatter,
    KeyValueFormatter,
    bind_log_context,
    bound_fields,
    formatter,
    log_context,
)


def _logger(kind: str) -> tuple[logging.Logger, io.StringIO]:
    """A logger of its own whose handler filters and formats as the site's console does."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(ContextFilter())
    handler.setFormatter(formatter(kind, "%(levelname)s %(message)s"))
    logger = logging.getLogger(f"test-logcontext-{kind}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, out


@pytest.fixture
def text() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    yield _logger("text")


@pytest.fixture
def jsonl() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    yield _logger("json")


def test_a_block_binds_its_fields_and_nested_blocks_add_to_them(text) -> None:
    logger, out = text
    logger.info("before")
    with log_context(job_id=7, host="gpu-1"):
        logger.info("claimed")
        with log_context(client_run_id="r 1", run_id=None):  # None: not known yet, left out
            bind_log_context(run_id=41)
            logger.warning("stored")
        logger.info("after the upload")
    logger.info("done")
    assert out.getvalue().splitlines() == [
        "INFO before",
        "INFO claimed job_id=7 host=gpu-1",
        'WARNING stored job_id=7 host=gpu-1 client_run_id="r 1" run_id=41',
        "INFO after the upload job_id=7 host=gpu-1",
        "INFO done",
    ]
    assert bound_fields() == {}


def test_each_thread_sees_its_own_fields_unless_it_runs_in_a_copy(text) -> None:
    logger, out = text
    with log_context(job_id=3):
        bare = threading.Thread(target=logger.info, args=("bare thread",))
        copied = threading.Thread(
            target=contextvars.copy_context().run, args=(logger.info, "copied context")
        )
        for thread in (bare, copied):
            thread.start()
            thread.join()
    assert out.getvalue().splitlines() == ["INFO bare thread", "INFO copied context job_id=3"]


def test_text_values_are_quoted_only_when_they_would_not_read_back(text) -> None:
    logger, out = text
    with log_context(a="plain-1.2", b="two words", c='say "hi"', d="k=v", e="", f="line\nbreak"):
        logger.info("m")
    assert out.getvalue() == (
        'INFO m a=plain-1.2 b="two words" c="say \\"hi\\"" d="k=v" e="" f="line\\nbreak"\n'
    )


def test_the_fields_come_before_a_traceback(text) -> None:
    logger, out = text
    with log_context(job_id=9):
        try:
            raise RuntimeError("the disk vanished")
        except RuntimeError:
            logger.exception("job failed")
    first, *rest = out.getvalue().splitlines()
    assert first == "ERROR job failed job_id=9"
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "RuntimeError: the disk vanished"


def test_json_lines_hold_the_message_level_logger_time_and_the_bound_fields(jsonl) -> None:
    logger, out = jsonl
    with log_context(job_id=7, client_run_id="r-1", level="not this"):
        logger.info("upload %s: run %s", "stored", 41)
        try:
            {}["missing"]
        except KeyError:
            logger.exception("failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first.pop("time").endswith("+00:00")  # UTC, ISO 8601
    assert first == {
        "job_id": 7,
        "client_run_id": "r-1",
        "level": "INFO",  # a bound field never hides the line's own keys
        "logger": "test-logcontext-json",
        "message": "upload stored: run 41",
    }
    assert second["level"] == "ERROR" and second["job_id"] == 7
    assert second["exception"].startswith("Traceback (most recent call last):")
    assert second["exception"].endswith("KeyError: 'missing'")


def test_json_lines_write_any_value_and_a_line_may_add_fields_of_its_own(jsonl) -> None:
    logger, out = jsonl
    with log_context(job_id=1, folder=io):  # not JSON: written as its str()
        logger.info("m", extra={"context": {"job_id": 2, "seq": 5}})
    line = json.loads(out.getvalue())
    assert (line["job_id"], line["seq"]) == (2, 5)
    assert line["folder"].startswith("<module 'io'")


def test_an_unknown_log_format_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="LOG_FORMAT must be one of text, json, not 'xml'"):
        formatter("xml")
    assert type(formatter("json")) is JsonFormatter
    assert type(formatter()) is KeyValueFormatter


@pytest.mark.parametrize("kind", ["text", "json"])
def test_the_lab_agents_celery_handlers_print_the_bound_ids(kind, monkeypatch) -> None:
    """worker.agent.app's after_setup_logger handler, on a handler like Celery's own."""
    pytest.importorskip("celery")
    monkeypatch.setenv("BENCHLOOP_BROKER_URL", "memory://")
    monkeypatch.setenv("LOG_FORMAT", kind)
    app = importlib.import_module("worker.agent.app")
    out = io.StringIO()
    logger = logging.getLogger("test-logcontext-agent")
    logger.handlers[:] = [logging.StreamHandler(out)]
    logger.propagate = False
    app._log_context_on_every_line(logger=logger, format="[%(levelname)s] %(message)s")
    with log_context(host="lab-cpu", job_id=12):
        logger.warning("site call failed")
    if kind == "text":
        assert out.getvalue() == "[WARNING] site call failed host=lab-cpu job_id=12\n"
    else:
        line = json.loads(out.getvalue())
        assert line["message"] == "site call failed"
        assert (line["host"], line["job_id"]) == ("lab-cpu", 12)
