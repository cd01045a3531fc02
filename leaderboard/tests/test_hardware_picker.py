"""The "your hardware" menu (issue 29): classes grouped by vendor and kind in name and memory
order, never by run count; "any GPU with N GB" and "fits in N GB" where they lead somewhere;
nothing chosen that the visitor did not choose; and the board's "More filters" label names
what its fold holds (issue 32)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from django.test import Client

from leaderboard.hardware_menu import hardware_menu, name_key
from leaderboard.menus import hardware_choices
from leaderboard.tests.factories import add_runs, record

pytestmark = pytest.mark.django_db


def _choice(
    label: str,
    kind: str = "gpu",
    vendor: str = "nvidia",
    *,
    chip: str = "",
    count: int = 1,
    memory_gb: float | None = None,
    runs: int = 1,
) -> dict:
    """A row as hardware_choices() returns it; the chip is the label without its size."""
    return {
        "id": 0,
        "slug": label.lower().replace(" ", "-"),
        "label": label,
        "kind": kind,
        "vendor": vendor,
        "chip": chip or label.rsplit(" ", 2)[0],
        "count": count,
        "memory_gb": memory_gb,
        "runs": runs,
    }


def _cpu(chip: str, memory_gb: float) -> dict:
    label = f"CPU only: {chip} · {memory_gb:g} GB"
    return _choice(label, "cpu", "", chip=chip, memory_gb=memory_gb)


def _groups(menu) -> dict[str, list[str]]:
    return {group: [label for _, label in options] for group, options in menu}


def test_classes_go_by_vendor_and_kind_in_name_and_memory_order_not_by_runs() -> None:
    choices = [
        _choice("RTX 3090 24 GB", memory_gb=24, runs=40),
        _choice("2× RTX 4090 24 GB", chip="RTX 4090", count=2, memory_gb=48, runs=30),
        _choice("RTX 4090 24 GB", memory_gb=24, runs=2),
        _choice("RTX 3060 12 GB", memory_gb=12, runs=9),
        _choice("Radeon RX 7900 XTX 24 GB", vendor="amd", memory_gb=24),
        _choice("Arc A770 16 GB", vendor="intel", memory_gb=16),
        _choice("Apple M4 Max 128 GB", kind="apple", vendor="apple", memory_gb=128),
        _choice("Apple M2 Max 96 GB", kind="apple", vendor="apple", memory_gb=96, runs=50),
        _choice("Apple M2 Max 64 GB", kind="apple", vendor="apple", memory_gb=64),
        _cpu("AMD EPYC 7763", 512),
        _cpu("AMD EPYC 7443P", 256),
        _choice("Mystery GPU 8 GB", vendor="", memory_gb=8),
        _choice("unknown hardware", kind="unknown", vendor=""),
    ]
    groups = _groups(hardware_menu(choices))
    assert list(groups)[:6] == ["NVIDIA", "AMD", "Intel", "Other GPUs", "Apple silicon", "CPU only"]
    # By name, then count, then memory: the RTX 4090 right before its 2× class, whatever the runs.
    assert groups["NVIDIA"] == [
        "RTX 3060 12 GB",
        "RTX 3090 24 GB",
        "RTX 4090 24 GB",
        "2× RTX 4090 24 GB",
    ]
    assert groups["Apple silicon"] == [
        "Apple M2 Max 64 GB",
        "Apple M2 Max 96 GB",
        "Apple M4 Max 128 GB",
    ]
    assert groups["CPU only"][0] == "CPU only: AMD EPYC 7443P · 256 GB"  # 7443P before 7763
    assert not any("unknown" in label for labels in groups.values() for label in labels)
    assert groups["Across machines"] == ["All hardware (quality only)"]


def test_names_sort_by_their_numbers() -> None:
    names = ["RTX 4060 Ti", "RTX A6000", "RTX 3090", "H100", "A100", "RTX 5090", "M10", "M2"]
    assert sorted(names, key=name_key) == [
        "A100", "H100", "M2", "M10", "RTX 3090", "RTX 4060 Ti", "RTX 5090", "RTX A6000",
    ]  # fmt: skip


def test_any_gpu_with_n_gb_and_fits_in_n_gb_are_offered_where_they_lead_somewhere() -> None:
    choices = [
        _choice("RTX 3060 12 GB", memory_gb=12),
        _choice("RTX 4090 24 GB", memory_gb=24),
        _choice("Apple M2 Max 96 GB", kind="apple", vendor="apple", memory_gb=96),
        _cpu("AMD EPYC 7443P", 4),
    ]
    menu = dict(hardware_menu(choices))
    # GPU sizes only (the Apple chip's 96 GB is not VRAM), as the board's ?vram= reads them.
    assert menu["Any GPU with this much memory"] == [
        ("vram:12", "any GPU with 12 GB"),
        ("vram:24", "any GPU with 24 GB"),
    ]
    fits = menu["Fits in this much memory"]
    # From the smallest GPU or Apple class up (a CPU's RAM does not count): 8 GB would be empty.
    assert fits[0] == ("fits:12", "fits in 12 GB") and ("fits:24", "fits in 24 GB") in fits
    assert "fits:8" not in dict(fits) and fits[-1] == ("fits:256", "fits in 256 GB")
    assert menu["Any machine of a kind"] == [
        ("kind:cpu", "any CPU-only machine"),
        ("kind:apple", "any Apple chip"),
    ]
    only_gpus = dict(hardware_menu(choices[:2]))
    assert "Any machine of a kind" not in only_gpus


def _runs_on_many_machines() -> None:
    on = {
        "4090": dict(gpu="NVIDIA GeForce RTX 4090", vram_gb=24),
        "3090": dict(gpu="NVIDIA GeForce RTX 3090", vram_gb=24),
        "7900": dict(gpu="AMD Radeon RX 7900 XTX", vram_gb=24),
        "m4": dict(gpu="Apple M4 Max", cpu="Apple M4 Max", vram_gb=None, ram_gb=128),
        "cpu": dict(gpu="", vram_gb=None, cpu="AMD EPYC 7443P", ram_gb=256),
    }
    runs = [record(model_id="alpha:8b", decode=90 + i, **on["3090"]) for i in range(4)]
    runs += [record(model_id=f"m{i}:8b", decode=50.0, **on[where]) for i, where in enumerate(on)]
    two = record(model_id="beta:8b", decode=150.0, **on["4090"])
    runs.append(replace(two, hardware=replace(two.hardware, gpu_count=2, vram_gb=48)))
    add_runs(*runs)


def test_the_stored_classes_make_the_menu(client: Client) -> None:
    _runs_on_many_machines()
    groups = _groups(hardware_menu(hardware_choices()))
    assert groups["NVIDIA"] == ["RTX 3090 24 GB", "RTX 4090 24 GB", "2× RTX 4090 24 GB"]
    assert groups["AMD"] == ["RX 7900 XTX 24 GB"]
    assert groups["Apple silicon"] == ["Apple M4 Max 128 GB"]
    assert groups["CPU only"] == ["CPU only: AMD EPYC 7443P · 256 GB"]
    assert ("vram:24", "any GPU with 24 GB") in dict(hardware_menu(hardware_choices()))[
        "Any GPU with this much memory"
    ]


def _select(html: str, select_id: str) -> str:
    return re.search(rf'<select id="{select_id}"[^>]*>(.*?)</select>', html, re.S)[1]


def test_nothing_is_chosen_for_the_visitor(client: Client) -> None:
    _runs_on_many_machines()
    landing = client.get("/").content.decode()
    menu = _select(landing, "landing-hw")
    assert " selected" not in menu  # the RTX 3090 has the most runs, and is not picked for you
    assert menu.lstrip().startswith('<option value="">')
    assert re.search(r'<select id="landing-hw" name="hw" required', landing)
    assert '<optgroup label="NVIDIA">' in menu and '<optgroup label="Apple silicon">' in menu
    assert menu.index(">RTX 3090 24 GB<") < menu.index(">RTX 4090 24 GB<")
    assert '<option value="vram:24">any GPU with 24 GB</option>' in menu
    assert '<option value="fits:24">fits in 24 GB</option>' in menu

    board = client.get("/leaderboard/").content.decode()
    assert "On RTX 3090 24 GB" in board  # the default view is still the busiest class
    chosen = re.findall(r'<option value="([^"]*)" selected>([^<]*)<', _select(board, "f-hw"))
    assert chosen == [("", "Pick yours (now RTX 3090 24 GB, the most runs)")]
    # What the visitor did choose is remembered from the URL, and only that.
    for query, value in (("hw=rtx-4090-24gb", "rtx-4090-24gb"), ("vram=24", "vram:24")):
        menu = _select(client.get(f"/leaderboard/?{query}").content.decode(), "f-hw")
        assert re.findall(r'<option value="([^"]*)" selected>', menu) == [value], query


def test_a_class_the_menu_does_not_list_is_not_shown_as_another(client: Client) -> None:
    _runs_on_many_machines()
    # "rtx-4090" names the chip in every size; no option stands for it, so none is selected
    # and the browser must not fall back on the first class in the list.
    menu = _select(client.get("/leaderboard/?hw=rtx-4090").content.decode(), "f-hw")
    assert re.findall(r'<option value="([^"]*)" selected>([^<]*)<', menu) == [
        ("", "the hardware in these filters")
    ]


def _more_filters(html: str) -> tuple[str, list[str]]:
    fold = html.split('<details class="filter-more"')[1].split("</details>")[0]
    summary = re.search(r"<summary>(.*?)</summary>", fold, re.S)[1]
    labels = re.findall(r'<div class="field"><label for="[^"]+">([^<]+)</label>', fold)
    checks = re.findall(r'<div class="check">.*?<label for="[^"]+">([^<]+)</label>', fold)
    return summary, labels + checks


def test_the_more_filters_label_names_what_is_inside(client: Client) -> None:
    add_runs(*[record(model_id="alpha:8b", decode=90 + i) for i in range(3)])
    summary, fields = _more_filters(client.get("/leaderboard/").content.decode())
    assert "Parameters" in fields and "Verified runs" in fields
    checks = {"Verified runs": "verified", "Hide runs imported from community sources": "imported"}
    for field in fields:
        assert checks.get(field, field).lower() in summary.lower(), field
    assert "Benchmark version" not in fields and "version" not in summary  # one version only

    add_runs(record(model_id="alpha:8b", decode=95, benchmark_version="4.0.0"))
    summary, fields = _more_filters(client.get("/leaderboard/").content.decode())
    assert "Benchmark version" in fields and summary.endswith(", benchmark version")
