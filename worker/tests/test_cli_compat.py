"""The earlier CLI's invocations (benchloop-cli 0.2.3 on PyPI, 0.3.0 unpublished) still work.

The invocations are the ones their documentation gives: the 0.2.3 README (`run --model …
--endpoint … --provider …`, `--hardware/--gpu/--gpu-memory-gb` through a tunnel, LM Studio and
MLX servers with `--provider openai_compat`, `export --output`) and the 0.3.0 option list
(`--provider vmlx`, `--command-used` or $BENCHLOOP_COMMAND_USED, the `suites` command).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from worker.cli import main
from worker.engine.errors import UsageError

# (earlier invocation, the same in today's spelling, the notes it prints)
OLD_AND_NEW = [
    (
        [
            "run",
            "--model",
            "qwen3:8b",
            "--endpoint",
            "http://localhost:11434",
            "--provider",
            "ollama",
        ],
        ["run", "--model", "qwen3:8b", "--url", "http://localhost:11434", "--provider", "ollama"],
        ["--endpoint is now spelled --url"],
    ),
    (
        ["run", "--model", "qwen3:8b", "--endpoint", "http://localhost:11435"]
        + [
            "--hardware",
            "NVIDIA RTX 4090 24GB",
            "--gpu",
            "NVIDIA RTX 4090",
            "--gpu-memory-gb",
            "24",
        ],
        ["run", "--model", "qwen3:8b", "--url", "http://localhost:11435"]
        + [
            "--hardware",
            "NVIDIA RTX 4090 24GB",
            "--gpu",
            "NVIDIA RTX 4090",
            "--gpu-memory-gb",
            "24",
        ],
        ["--endpoint is now spelled --url"],
    ),
    (
        ["run", "--model", "qwen3:8b", "--endpoint", "http://localhost:1234"]
        + ["--provider", "openai_compat", "--suites", "speed,agent", "--harness", "hermes"],
        ["run", "--model", "qwen3:8b", "--url", "http://localhost:1234"]
        + ["--provider", "openai", "--suites", "speed,agent", "--harness", "hermes"],
        [
            "--endpoint is now spelled --url",
            "--provider openai_compat is now spelled --provider openai",
        ],
    ),
    (
        ["run", "--model", "mlx-community/Qwen3-8B-4bit", "--endpoint=http://localhost:8000"]
        + ["--provider", "vmlx", "--profile", "smoke", "--trials", "3", "--remote"],
        ["run", "--model", "mlx-community/Qwen3-8B-4bit", "--url", "http://localhost:8000"]
        + ["--provider", "openai", "--profile", "smoke", "--trials", "3", "--remote"],
        ["--endpoint is now spelled --url", "--provider vmlx is now spelled --provider openai"],
    ),
    (
        ["run", "--model", "qwen3:8b", "--endpoint", "http://10.0.0.5:8080", "--local"]
        + ["--command-used", "llama-server -m model.gguf -ngl 99", "--max-tokens", "512"],
        ["run", "--model", "qwen3:8b", "--url", "http://10.0.0.5:8080", "--local"]
        + ["--launch-command", "llama-server -m model.gguf -ngl 99", "--max-tokens", "512"],
        ["--endpoint is now spelled --url", "--command-used is now spelled --launch-command"],
    ),
]


@pytest.fixture
def prepared(monkeypatch) -> list:
    """The RunConfig each `run` would start with; preflight stops there (exit 2, no network)."""
    seen = []

    def stop(config, on_event=None):
        seen.append(dataclasses.asdict(config))
        raise UsageError("stopped before preflight")

    monkeypatch.setattr("worker.cli.prepare_run", stop)
    return seen


@pytest.mark.parametrize(("old", "new", "notes"), OLD_AND_NEW)
def test_an_earlier_invocation_runs_as_its_new_spelling(
    old, new, notes, prepared, bench_home, capsys, monkeypatch
):
    monkeypatch.delenv("BENCHLOOP_COMMAND_USED", raising=False)
    assert main(old) == 2
    err_old = capsys.readouterr().err
    assert main(new) == 2
    err_new = capsys.readouterr().err
    assert prepared[0] == prepared[1]
    # One line per old spelling, naming the new one, before anything else; none for the new.
    assert err_old.splitlines()[: len(notes)] == [f"note: {n}" for n in notes]
    assert "note:" not in err_new and "unrecognized" not in err_old


def test_the_provider_names_map_to_the_openai_provider(prepared, bench_home, capsys):
    for name in ("openai_compat", "vmlx"):
        assert main(["run", "--url", "http://127.0.0.1:9", "--provider", name]) == 2
    assert [config["provider"] for config in prepared] == ["openai", "openai"]
    with pytest.raises(SystemExit) as caught:
        main(["run", "--provider", "lmstudio"])
    assert caught.value.code == 2


def test_the_command_used_variable_is_the_launch_command(prepared, bench_home, capsys, monkeypatch):
    monkeypatch.setenv("BENCHLOOP_COMMAND_USED", "llama-server -m model.gguf -ngl 99")
    assert main(["run", "--url", "http://127.0.0.1:9"]) == 2
    assert prepared[-1]["launch_command"] == "llama-server -m model.gguf -ngl 99"
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "note: $BENCHLOOP_COMMAND_USED is now spelled --launch-command"
    # An explicit flag wins, and then the variable is not mentioned.
    assert main(["run", "--url", "http://127.0.0.1:9", "--launch-command", "vllm serve x"]) == 2
    assert prepared[-1]["launch_command"] == "vllm serve x"
    assert "note:" not in capsys.readouterr().err


def test_json_output_stays_one_document_after_a_note(prepared, bench_home, capsys):
    assert main(["run", "--endpoint", "http://127.0.0.1:9", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["message"] == "stopped before preflight"
    assert captured.err.startswith("note: --endpoint is now spelled --url\n")


def test_suites_is_info(bench_home, capsys):
    assert main(["suites", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "note: benchloop suites is now spelled benchloop info\n"
    old = json.loads(captured.out)
    assert main(["info", "--json"]) == 0
    new = json.loads(capsys.readouterr().out)
    assert old["suites"] == new["suites"] and old["profiles"] == new["profiles"]
    assert main(["suites"]) == 0
    text = capsys.readouterr().out
    assert "Suites" in text and "toolcall" in text and "Profiles" in text


def test_the_aliases_stay_out_of_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "--url" in text and "--launch-command" in text
    assert "--endpoint" not in text and "--command-used" not in text and "vmlx" not in text


def test_export_output_writes_the_file(bench_home, tmp_path, capsys):
    target = tmp_path / "my-runs.json"
    assert main(["export", "--output", str(target)]) == 0
    assert json.loads(target.read_text())["runs"] == []


@pytest.mark.llm
def test_an_earlier_invocation_benchmarks_the_real_server(llm_url, llm_model, bench_home, capsys):
    argv = ["run", "--model", llm_model, "--endpoint", llm_url, "--provider", "vmlx"]
    argv += ["--command-used", "llama-server -m SmolLM2.gguf -c 4096", "--json"]
    argv += ["--tasks", "speed-p128-n256", "--trials", "1", "--max-tokens", "8"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[:3] == [
        "note: --endpoint is now spelled --url",
        "note: --provider vmlx is now spelled --provider openai",
        "note: --command-used is now spelled --launch-command",
    ]
    bundle = json.loads((bench_home / "runs").glob("*/run.json").__next__().read_text())
    assert json.loads(captured.out)["run_id"] == bundle["run_id"]
    assert bundle["status"] == "complete" and bundle["provider"] == "openai_compat"
    assert bundle["engine"]["name"] == "llama.cpp"
    assert bundle["model"]["model_id"] == llm_model
    # Stated by the user, it is kept as given, where the server's own command line would be.
    assert bundle["launch"]["command"] == "llama-server -m SmolLM2.gguf -c 4096"
