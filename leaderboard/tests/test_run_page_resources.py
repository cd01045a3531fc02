"""The run page's "Memory, energy and cold start": figures where the bundle has them, "not
measured" with its reason where it does not, and a plain word for bundles that predate them.

The blocks are shaped as the engine writes them (worker.engine.resources) and checked against
the upload schema first, so the page is tested on what an upload can really hold.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from django.test import Client

from leaderboard.tests.factories import HOSTILE, add_runs, record

pytestmark = pytest.mark.django_db
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "runs/schemas/upload-1.schema.json").read_text()
)

MEASURED = {
    "resources": {
        "energy_method": "GPU board power via NVML",
        "energy_note": "",
        "gpu_devices_expected": 2,
        "gpu_devices_seen": 2,
        "idle_watts": 60.5,
        "peak_vram_mib": {"0": 15660.0, "1": 14848.0},
        "peak_server_rss_mib": 1843.2,
        "server_rss_note": "",
        "interval_s": 0.1,
        "energy": {
            "joules_per_output_token": 4.1234,
            "joules_per_prompt_token": 0.0567,
            "trials": 45,
            "trials_measured": 45,
            "note": "",
        },
    },
    "cold_start": {
        "load_s": 12.345,
        "load_source": "managed",
        "first_request_ms": 187.4,
        "first_request_after_load": True,
        "note": "",
    },
}
NO_GPU = {
    "resources": {
        "energy_method": None,
        "energy_note": "not measured: NVML is not available "
        "(NVMLError_LibraryNotFound: NVML Shared Library Not Found)",
        "gpu_devices_expected": 0,
        "gpu_devices_seen": 0,
        "idle_watts": None,
        "peak_vram_mib": {},
        "peak_server_rss_mib": 402.5,
        "server_rss_note": "",
        "interval_s": 0.1,
        "energy": {
            "joules_per_output_token": None,
            "joules_per_prompt_token": None,
            "trials": 9,
            "trials_measured": 0,
            "note": "not measured: NVML is not available",
        },
    },
    "cold_start": {
        "load_s": None,
        "load_source": None,
        "first_request_ms": 95.0,
        "first_request_after_load": None,
        "note": "the server was started outside this run, so its load time is not seen",
    },
}


def _valid(blocks: dict) -> dict:
    for name, block in blocks.items():
        jsonschema.validate(block, {**SCHEMA["properties"][name], "$defs": SCHEMA["$defs"]})
    return blocks


def _page(client: Client, raw: dict) -> str:
    uploaded = record()
    uploaded.raw_payload = raw
    (run,) = add_runs(uploaded)
    response = client.get(f"/runs/{run.id}/")
    assert response.status_code == 200
    return response.content.decode()


def _section(html: str) -> str:
    start = html.index('id="resources"')
    return html[start : html.index("</section>", start)]


def test_measured_energy_memory_and_cold_start_are_shown(client: Client) -> None:
    section = _section(_page(client, _valid(MEASURED)))
    assert "4.123 J" in section and "median of 45 of 45 trials" in section
    assert "0.0567 J" in section
    assert "GPU board power via NVML" in section and "idle 60 W" in section
    assert "GPU 0: <strong>15.29 GiB</strong>" in section
    assert "GPU 1: <strong>14.50 GiB</strong>" in section
    assert "1.80 GiB" in section  # 1843.2 MiB of server RAM
    assert "12.3 s" in section and "health check" in section
    assert "187 ms" in section and "right after the load" in section


def test_without_a_gpu_the_page_says_not_measured_and_why_and_still_shows_ram(
    client: Client,
) -> None:
    section = _section(_page(client, _valid(NO_GPU)))
    assert "not measured: not measured" not in section
    assert section.count("NVML Shared Library Not Found") >= 1
    assert "0.39 GiB" in section  # the server's RAM is measured without a GPU
    assert "its load time is not seen" in section
    assert "95 ms" in section and "is not known" in section


def test_a_bundle_in_a_v3_envelope_is_read_too(client: Client) -> None:
    section = _section(_page(client, {"run": _valid(MEASURED), "visibility": "public"}))
    assert "4.123 J" in section


def test_an_older_bundle_says_the_figures_were_not_recorded(client: Client) -> None:
    section = _section(_page(client, {"bundle_schema_version": "1.1"}))
    assert "predates these figures" in section


def test_notes_and_odd_values_are_escaped_or_dropped(client: Client) -> None:
    hostile = json.loads(json.dumps(NO_GPU))
    hostile["resources"]["energy_note"] = HOSTILE
    hostile["resources"]["peak_vram_mib"] = {"0": "lots", HOSTILE: 1.0}
    hostile["cold_start"]["load_s"] = "fast"
    hostile["cold_start"]["load_source"] = HOSTILE
    html = _page(client, hostile)
    assert "<script>alert(1)" not in html
    section = _section(html)
    assert "&lt;script&gt;" in section
    assert "fast" not in section and "lots" not in section
