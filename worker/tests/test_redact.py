"""The one redaction every public surface and the CLI use (worker/rules/redact.py)."""

from __future__ import annotations

import json

import pytest

from worker.engine.bundle import upload_view
from worker.rules.redact import REDACTED, redact_command, redact_field, redact_text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # The review's misses: --rpc host:port, compressed IPv6, home directories.
        ("llama-server --rpc 10.0.0.2:50052,10.0.0.3:50052", "10.0.0.2"),
        ("llama-server --rpc rpc-box:50052", "rpc-box"),
        ("connect to fe80::1 refused", "fe80::1"),
        ("connect to fe80::1%eth0 refused", "fe80::1"),
        ("bind ::1 failed", "::1"),
        ("via [::1]:11434", "::1"),
        ("upstream 2001:db8::5 timed out", "2001:db8::5"),
        ("at [2001:db8::5]:8080", "2001:db8::5"),
        ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334", "8a2e:0370"),
        ("mapped ::ffff:192.0.2.1", "192.0.2.1"),
        ("-m /home/alice/models/q.gguf", "alice"),
        ("-m /var/home/alice/models/q.gguf", "alice"),
        ("-m /Users/alice/models/q.gguf", "alice"),
        ("-m C:\\Users\\alice\\models\\q.gguf", "alice"),
        ("-m ~alice/models/q.gguf", "alice"),
        # And what the redaction already knew, kept.
        ("see http://192.168.1.20:11434/v1", "192.168.1.20"),
        ("https://bob:hunter2@api.example.org/v1", "hunter2"),
        ("postgres bob:hunter2@db.internal", "hunter2"),
        ("write to alice@example.org", "alice@example.org"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln", "eyJhbGciOi"),
        ("Authorization: Bearer 7f3a9c2b1e0d4f6a", "7f3a9c2b1e0d4f6a"),
        ("key bl_AbCdEfGhIjKlMnOpQrStUv", "bl_AbCdEfGh"),
        ("OPENAI key sk-proj-9fQ2xL7vB4nM8kR1tY6wE3", "sk-proj-9fQ2"),
        ("hf token hf_AbCdEfGhIjKlMnOpQrSt12", "hf_AbCdEfGh"),
        ("gpu-box-7:11434 refused", "gpu-box-7"),
        ("localhost:8080 refused", "localhost:8080"),
        ("host buildbox.corp.internal", "buildbox"),
        ("host printer.local", "printer"),
        ("raw 10.1.2.3", "10.1.2.3"),
        ("addr_10.1.2.3", "10.1.2.3"),
    ],
)
def test_addresses_secrets_and_home_directories_are_removed(text: str, secret: str) -> None:
    clean = redact_text(text)
    assert secret not in clean
    assert REDACTED in clean


@pytest.mark.parametrize(
    "text",
    [
        "2026-05-12T19:00:08.146111+00:00",
        "qwen3:8b",
        "llama3.1:70b-instruct-q4_K_M",
        "hf.co/bartowski/Qwen3-8B-GGUF:Q4_K_M",
        "speed-p128-n256",
        "matched 3/4 rules; ratio 3:1",
        "llama.cpp b4567 (0.6.0.1)",
        "token generation speed, basic information",
        "std::vector<int>",
        "~10 tok/s on ~/models",
        "sha256:12548651634d56a7db4bd657dd87304d94e06b0f8fa58daeab0fb",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_launch_commands_also_lose_secret_option_values() -> None:
    command = (
        "HF_TOKEN=abc llama-server -m /home/alice/m.gguf --host 0.0.0.0 --api-key plainsecret"
        " --rpc gpu-a:50052 -ngl 99"
    )
    clean = redact_command(command)
    for secret in ("abc ", "alice", "0.0.0.0", "plainsecret", "gpu-a"):
        assert secret not in clean
    assert clean.endswith("-ngl 99") and "m.gguf" in clean


def test_a_redacted_column_value_never_grows() -> None:
    assert len(redact_field("x ::1")) == len("x ::1")
    assert "::1" not in redact_field("x ::1")
    assert redact_field("qwen3:8b") == "qwen3:8b"


def test_the_cli_scrubs_every_string_of_an_upload_with_the_same_redaction() -> None:
    bundle = {
        "model": {"model_id": "m"},
        "machine": {"endpoint": "http://10.9.9.9:8080", "hardware_label": "lab fe80::1"},
        "suites": {
            "speed": {
                "tasks": [
                    {
                        "task_id": "t1",
                        "error": "connect [2001:db8::5]:8080 from /home/alice/bench",
                        "metadata": {"note": "retried gpu-box:11434"},
                    }
                ]
            }
        },
    }
    text = json.dumps(upload_view(bundle))
    for secret in ("10.9.9.9", "fe80::1", "2001:db8::5", "alice", "gpu-box"):
        assert secret not in text
    assert "lab " in text and "/home/" in text
