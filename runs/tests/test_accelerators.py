"""The accelerator data file: its rules, its coverage, and how stored names find their entry."""

from __future__ import annotations

import json

import pytest

from runs import normalize
from runs.accelerators import DATA_FILE, DataFileError, catalog, load, name_key, parse_entry

GPU = ("gpu", "apple")
CPU = ("cpu", "apple")


def test_the_data_file_loads_and_every_figure_has_a_source() -> None:
    raw = json.loads(DATA_FILE.read_text())["accelerators"]
    entries = load().entries
    assert len(raw) >= 90
    for entry in entries:
        assert entry.bandwidth_gbps > 0, entry.name
        for figure in ("bandwidth_gbps", "memory_gb", "fp16_tflops", "int8_tops"):
            if getattr(entry, figure) is not None:
                assert len(entry.source_of(figure)) > 10, (entry.name, figure)


@pytest.mark.parametrize(
    "name",
    [
        "RTX 3060", "RTX 3090", "RTX 4070", "RTX 4080", "RTX 4090", "RTX 5090", "A100", "H100",
        "H200", "L40S", "RX 7900 XTX", "MI300X", "Arc A770",
        "M1", "M1 Pro", "M1 Max", "M1 Ultra", "M2", "M2 Pro", "M2 Max", "M2 Ultra",
        "M3", "M3 Pro", "M3 Max", "M3 Ultra", "M4", "M4 Pro", "M4 Max",
    ],
)  # fmt: skip
def test_the_issue_s_accelerators_are_listed_with_bandwidth_memory_and_compute(name) -> None:
    entry = catalog().find(name, kinds=GPU)
    assert entry is not None, name
    assert entry.memory_gb and entry.fp16_tflops
    if entry.kind == "gpu" and entry.vendor == "nvidia":
        assert entry.int8_tops and entry.int8_tops > entry.fp16_tflops


def test_cpu_bandwidth_is_channels_times_speed_for_one_socket() -> None:
    epyc = catalog().find("AMD EPYC 9654 96-Core Processor", kinds=CPU)
    assert (epyc.name, epyc.bandwidth_gbps) == ("EPYC 9654", 460.8)  # 12 × 4800 MT/s × 8 B
    assert catalog().find("Intel(R) Xeon(R) Platinum 8480+", kinds=CPU).bandwidth_gbps == 307.2
    assert catalog().find("AMD Ryzen 9 7950X 16-Core Processor", kinds=CPU).bandwidth_gbps == 83.2
    desktop = [e for e in catalog().entries if e.kind == "cpu" and e.bandwidth_gbps < 110]
    server = [e for e in catalog().entries if e.kind == "cpu" and e.bandwidth_gbps >= 200]
    assert len(desktop) >= 8 and len(server) >= 8


@pytest.mark.parametrize(
    ("stored", "memory", "expected"),
    [
        ("NVIDIA GeForce RTX 4090", None, "RTX 4090"),
        ("nvidia geforce rtx 4090", 24, "RTX 4090"),
        ("RTX4090", None, "RTX 4090"),
        ("RTX 4090 Laptop GPU", None, "RTX 4090 Laptop"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 16, "RTX 4090 Laptop"),
        ("RTX 4070 Ti", None, "RTX 4070 Ti"),
        ("RTX 4070 Ti SUPER", None, "RTX 4070 Ti Super"),
        ("NVIDIA A100-SXM4-80GB", None, "A100 SXM4 80GB"),
        ("A100-SXM4", 39.4, "A100 SXM4 40GB"),
        ("A100", 79.6, "A100 SXM4 80GB"),
        ("NVIDIA H100 80GB HBM3", None, "H100 SXM"),
        ("NVIDIA H100 PCIe", 80, "H100 PCIe"),
        ("RTX 3060", 8, "RTX 3060 8GB"),
        ("RTX 3060", 12, "RTX 3060"),
        ("AMD Radeon RX 7900 XTX", None, "RX 7900 XTX"),
        ("AMD Instinct MI300X", None, "MI300X"),
        ("Intel(R) Arc(TM) A770 Graphics", 16, "Arc A770"),
        ("Apple M3 Max", None, "M3 Max"),
    ],
)
def test_stored_gpu_names_find_their_entry(stored, memory, expected) -> None:
    entry = catalog().find(stored, kinds=GPU, memory_gb=memory)
    assert entry is not None and entry.name == expected
    # The site stores the canonical form; it must find the same entry.
    assert catalog().find(normalize.canonical_gpu(stored), kinds=GPU, memory_gb=memory) == entry


@pytest.mark.parametrize(
    "stored", ["RTX 4090 D", "RTX 4090 Laptop 12GB Max-Q", "RTX 9090", "Radeon VII", "M5 Max"]
)
def test_a_different_product_never_borrows_a_neighbour_s_entry(stored) -> None:
    found = catalog().find(stored, kinds=GPU)
    assert found is None or name_key(found.name) == name_key(stored)


def test_the_laptop_card_is_not_the_desktop_card() -> None:
    laptop = catalog().find("NVIDIA GeForce RTX 4090 Laptop GPU", kinds=GPU)
    desktop = catalog().find("NVIDIA GeForce RTX 4090", kinds=GPU)
    assert laptop.bandwidth_gbps == 576 and desktop.bandwidth_gbps == 1008


def test_an_unnamed_server_cpu_gets_its_family_s_fastest_member() -> None:
    xeon = catalog().find("Intel(R) Xeon(R) Processor", kinds=CPU)
    epyc = catalog().find("AMD EPYC", kinds=CPU)
    fastest_epyc = max(e.bandwidth_gbps for e in catalog().entries if e.family == "EPYC")
    assert epyc.bandwidth_gbps == fastest_epyc == 614.4
    assert "fastest EPYC" in epyc.source
    assert xeon.bandwidth_gbps == max(
        e.bandwidth_gbps for e in catalog().entries if e.family == "Xeon"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "tpu"}, "kind must be one of"),
        ({"source": ""}, "needs a source"),
        ({"bandwidth_gbps": 3.35e6}, "outside"),
        ({"bandwidth_gbps": None}, "bandwidth is required"),
        ({"memory_gb": "24"}, "must be a number"),
        ({"name": "NVIDIA GeForce"}, "no distinguishing words"),
        ({"channels": 2, "mts": 5200}, "not both"),
    ],
)
def test_entries_that_break_a_rule_are_refused_with_their_name(change, message) -> None:
    entry = {"name": "RTX 4090", "kind": "gpu", "bandwidth_gbps": 1008, "source": "spec page"}
    with pytest.raises(DataFileError, match=message):
        parse_entry({**entry, **change})


def test_a_duplicate_product_in_the_file_is_refused(tmp_path) -> None:
    document = json.loads(DATA_FILE.read_text())
    document["accelerators"].append({**document["accelerators"][0], "name": "GeForce RTX-3060"})
    path = tmp_path / "accelerators.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DataFileError, match="the same product as RTX 3060"):
        load(path)
