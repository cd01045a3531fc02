"""The lane rule (runs.lanes) and labels that tell stacks shown together apart (runs.labels)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from runs import lane_rows as lanes
from runs.labels import labels_by_id as distinct_labels
from runs.lanes import lane_version
from runs.models import Stack


def _row(class_id, decode, *, scale="v3", comparable=True, version="3.0.0", **extra) -> dict:
    row = {
        "id": extra.pop("id", 1),
        "stack_id": 1,
        "hardware_class_id": class_id,
        "score_scale": scale,
        "comparable": comparable,
        "benchmark_version": version,
        "decode_tps_median": decode,
        "decode_tps_mean": None,
        "prefill_tps_median": None,
        "prefill_tps_mean": extra.pop("prefill_mean", None),
        "ttft_ms_median": None,
        "ttft_ms_mean": None,
        "overall_score": extra.pop("overall", None),
        "quality_score": extra.pop("quality", None),
        "submitter": extra.pop("submitter", "ada"),
        "started_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    return lanes.with_headlines(row)


def test_lanes_split_by_class_scale_and_version_and_skip_what_does_not_count() -> None:
    rows = [
        *(_row(1, d) for d in (10.0, 12.0, 11.0)),
        *(_row(2, d) for d in (100.0, 300.0)),
        _row(1, 999.0, comparable=False),  # a non-comparable v3 run is in no lane
        _row(1, 50.0, version="3.1.0"),  # another benchmark version is another lane
        _row(1, 60.0, scale="v2", comparable=False),  # v2 has no comparability rule
        _row(None, 5.0),  # no hardware class: no lane at all
    ]
    found = {lane.key: lane for lane in lanes.lanes(rows)}
    assert set(found) == {
        (1, "v3", "3.0.0"),
        (2, "v3", "3.0.0"),
        (1, "v3", "3.1.0"),
        (1, "v2", "3.0.0"),
    }
    first = found[(1, "v3", "3.0.0")]
    assert (first.run_count, first.decode.median, first.decode.low, first.decode.high) == (
        3,
        11.0,
        10.0,
        12.0,
    )
    # Two runs have a median (their mean) but are too few for an interval.
    second = found[(2, "v3", "3.0.0")]
    assert second.decode == lanes.Interval(2, 200.0) and not second.decode.has_interval
    assert list(found)[0] == (1, "v3", "3.0.0")  # most runs first


def test_quality_is_pooled_across_classes_and_speed_falls_back_to_the_mean() -> None:
    rows = [_row(c, 10.0, quality=q) for c, q in ((1, 50.0), (2, 60.0), (3, 70.0))]
    rows.append(_row(4, 10.0, quality=99.0, comparable=False))
    assert lanes.pooled_quality(rows)[("v3", "3.0.0")] == lanes.Interval(3, 60.0, 50.0, 70.0)
    mean_only = _row(1, None, prefill_mean=850.0)
    assert mean_only["prefill"] == 850.0 and mean_only["decode"] is None


def test_a_lanes_best_run_is_the_highest_then_the_newest_then_the_lowest_id() -> None:
    """runs.lanes.aggregate, the one rule the stored lanes, the pages and the boards follow."""
    later = datetime(2026, 2, 1, tzinfo=UTC)
    rows = [
        _row(1, 10.0, id=5, overall=70.0),
        _row(1, 12.0, id=3, overall=70.0),
        {**_row(1, 11.0, id=4, overall=70.0), "started_at": later},
        _row(1, 99.0, id=2, overall=None),
        _row(1, 11.0, id=1, overall=60.0, submitter="bob"),
    ]
    (found,) = lanes.lanes(rows)
    assert found.best["id"] == 4 and found.submitters == 2
    speed = [{**r, "score_scale": "speed", "speed_version": "2"} for r in rows]
    (fastest,) = lanes.lanes(speed)
    assert fastest.key == (1, "speed", "2") and fastest.best["id"] == 2


def test_a_runs_lane_version_is_read_alike_from_a_row_and_a_run() -> None:
    row = {"score_scale": "speed", "benchmark_version": "3.0.0", "speed_version": "2"}
    run = SimpleNamespace(**row)  # a stored Run reads the same by attribute
    assert lane_version(row) == lane_version(run) == "2"
    assert lane_version({**row, "score_scale": "v3"}) == "3.0.0"
    assert lane_version({"score_scale": "v2", "benchmark_version": None}) == ""


def _stack(key: str, **fields) -> Stack:
    defaults = {"model_id": "qwen3:32b", "quantization": "Q8_0", "engine": "ollama"}
    return Stack.objects.create(comparability_key=key, **{**defaults, **fields})


@pytest.mark.django_db
def test_stacks_that_share_a_label_are_told_apart_by_what_differs() -> None:
    raw = _stack("a", harness="raw")
    agent = _stack("b", harness="mini-swe")
    long = _stack("c", harness="raw", context_length=32768)
    other = _stack("d", model_id="qwen3:8b")
    labels = distinct_labels([raw, agent, long, other])
    assert len(set(labels.values())) == 4
    assert labels[agent.id].startswith("qwen3:32b Q8_0 · ollama · mini-swe harness")
    assert labels[other.id] == "qwen3:8b Q8_0 · ollama"  # unique already: left alone
    assert "ctx 32K" in labels[long.id] and "ctx default" in labels[raw.id]


@pytest.mark.django_db
def test_only_the_settings_that_differ_are_named_and_the_rest_gets_the_id() -> None:
    a = _stack("a", launch_settings={"threads": 8, "batch": 512})
    b = _stack("b", launch_settings={"threads": 16, "batch": 512})
    labels = distinct_labels([a, b])
    assert labels[a.id].endswith("threads=8") and labels[b.id].endswith("threads=16")
    # Settings public pages hide (an endpoint) cannot name a stack: the id does.
    c = _stack("c", launch_settings={"endpoint": "http://10.0.0.1:8080"})
    d = _stack("d", launch_settings={"endpoint": "http://10.0.0.2:8080"})
    labels = distinct_labels([c, d])
    assert labels[c.id] != labels[d.id] and "10.0.0" not in labels[c.id] + labels[d.id]
