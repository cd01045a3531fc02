from __future__ import annotations

import pytest

from runs.models import Stack

pytestmark = pytest.mark.django_db


def _stack(**fields) -> Stack:
    base = dict(
        model_id="qwen3:32b",
        quantization="Q8_0",
        model_sha256="",
        engine="ollama",
        harness="raw",
        context_length=None,
        kv_cache_type="",
        draft_model="",
        launch_settings={},
    )
    return Stack.for_identity(**{**base, **fields})


def test_stacks_that_read_alike_get_the_parts_that_tell_them_apart() -> None:
    raw = _stack()
    hermes = _stack(harness="xml-tool-call", context_length=32768)
    other = _stack(model_id="qwen3:8b")
    assert raw.label == hermes.label == "qwen3:32b Q8_0 · ollama"

    labels = Stack.distinct_labels([raw, hermes, other])

    assert labels == [
        "qwen3:32b Q8_0 · ollama · raw harness · ctx default",
        "qwen3:32b Q8_0 · ollama · xml-tool-call harness · ctx 32K",
        "qwen3:8b Q8_0 · ollama",  # no neighbour reads like it: the short label is enough
    ]


def test_launch_settings_and_digests_name_only_what_differs() -> None:
    a = _stack(launch_settings={"parallel_slots": 1, "flash_attn": True}, model_sha256="ab" * 32)
    b = _stack(launch_settings={"parallel_slots": 4, "flash_attn": True}, model_sha256="cd" * 32)
    c = _stack(launch_settings={"parallel_slots": 4, "flash_attn": True}, model_sha256="ab" * 32)

    labels = Stack.distinct_labels([a, b, c, a])

    assert labels == [
        "qwen3:32b Q8_0 · ollama · parallel_slots=1 · sha256 abababab",
        "qwen3:32b Q8_0 · ollama · parallel_slots=4 · sha256 cdcdcdcd",
        "qwen3:32b Q8_0 · ollama · parallel_slots=4 · sha256 abababab",
        "qwen3:32b Q8_0 · ollama · parallel_slots=1 · sha256 abababab",
    ]
    assert len(set(labels[:3])) == 3
