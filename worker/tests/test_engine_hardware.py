"""Hardware detection (real psutil, NVML really absent here, a fake NVML for the GPU path)."""

from __future__ import annotations

import socket
import stat
import sys
import types
import uuid

import psutil
import pytest

from worker.engine.hardware import detect_hardware, hardware_label, machine_id
from worker.engine.locality import classify
from worker.engine.testing.nvml_trace import nvml_present
from worker.rules.hardware import gpu_summary

_GIB = 1024**3


@pytest.mark.skipif(nvml_present(), reason="this machine has a working NVML")
def test_without_nvml_cpu_ram_and_os_are_still_filled():
    hw = detect_hardware()
    assert hw["attributed"] is True
    assert hw["cpu_model"]
    assert hw["cpu_logical_cores"] == psutil.cpu_count(logical=True)
    assert hw["cpu_physical_cores"] >= 1
    assert hw["ram_gb"] == round(psutil.virtual_memory().total / _GIB, 2)
    assert hw["os"] and hw["architecture"]
    assert hw["gpus"] == []
    assert hw["gpu_source"] == "none"
    assert any("NVML not available" in note for note in hw["notes"])
    assert hw["label"].startswith(hw["cpu_model"])


def _fake_nvml(devices: list[tuple[str, int | None]]) -> types.ModuleType:
    """Stand-in for pynvml with the calls the engine makes (mocking NVML is the only mock)."""
    fake = types.ModuleType("pynvml")
    state = {"init": 0, "shutdown": 0}

    class Memory:
        def __init__(self, total: int):
            self.total = total

    def memory(handle: int) -> Memory:
        total = devices[handle][1]
        if total is None:
            raise RuntimeError("Not Supported")
        return Memory(total)

    fake.nvmlInit = lambda: state.__setitem__("init", state["init"] + 1)
    fake.nvmlShutdown = lambda: state.__setitem__("shutdown", state["shutdown"] + 1)
    fake.nvmlSystemGetDriverVersion = lambda: b"550.54.15"
    fake.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12040
    fake.nvmlDeviceGetCount = lambda: len(devices)
    fake.nvmlDeviceGetHandleByIndex = lambda index: index
    fake.nvmlDeviceGetName = lambda handle: devices[handle][0]
    fake.nvmlDeviceGetMemoryInfo = memory
    fake.state = state
    return fake


def test_a_fake_nvml_with_two_gpus_reports_both_with_their_vram(monkeypatch):
    fake = _fake_nvml([("NVIDIA GeForce RTX 4090", 24 * _GIB), ("NVIDIA RTX A4000", 16 * _GIB)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    hw = detect_hardware()
    assert [g["name"] for g in hw["gpus"]] == ["NVIDIA GeForce RTX 4090", "NVIDIA RTX A4000"]
    assert [g["vram_gb"] for g in hw["gpus"]] == [24.0, 16.0]
    assert hw["gpu_driver_version"] == "550.54.15"
    assert hw["cuda_version"] == "12.4"
    assert hw["gpu_source"] == "nvml"
    assert fake.state == {"init": 1, "shutdown": 1}
    assert gpu_summary(hw) == ("NVIDIA GeForce RTX 4090, NVIDIA RTX A4000", 40.0)
    assert hw["cpu_model"] and hw["ram_gb"]


def test_identical_gpus_get_a_counted_label_and_missing_vram_is_null(monkeypatch):
    monkeypatch.setitem(
        sys.modules, "pynvml", _fake_nvml([("NVIDIA H100 80GB HBM3", 80 * _GIB)] * 2)
    )
    assert detect_hardware()["label"] == "2× NVIDIA H100 80GB HBM3 80GB"
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([("NVIDIA GB10", None)]))
    hw = detect_hardware()
    assert hw["gpus"][0]["vram_gb"] is None
    assert hw["gpus"][0]["name"] == "NVIDIA GB10"


def test_overrides_win_and_a_remote_server_claims_no_local_hardware():
    hw = detect_hardware(gpu="NVIDIA RTX 3090", gpu_memory_gb=24.0, label="my rig")
    assert hw["gpus"] == [{"index": 0, "name": "NVIDIA RTX 3090", "vram_gb": 24.0}]
    assert hw["label"] == "my rig"
    assert hw["gpu_source"] == "override"
    remote = detect_hardware(attributed=False)
    assert remote["cpu_model"] == "" and remote["ram_gb"] is None and remote["gpus"] == []
    assert hardware_label(remote) == ""


def _mac_forms() -> set[str]:
    forms = set()
    node = uuid.getnode()
    forms.add(f"{node:012x}")
    forms.add(hex(node))
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family == psutil.AF_LINK and addr.address:
                mac = addr.address.lower()
                forms.update({mac, mac.replace(":", ""), mac.replace(":", "-")})
    forms.discard("000000000000")
    forms.discard("00:00:00:00:00:00")
    return forms


def test_the_machine_id_is_a_salted_hash_and_never_a_mac(tmp_path):
    first = machine_id(tmp_path)
    assert first.startswith("sha256:") and len(first) == 71
    assert machine_id(tmp_path) == first  # stable while the salt exists
    salt = tmp_path / "machine-salt"
    assert stat.S_IMODE(salt.stat().st_mode) == 0o600
    assert all(form not in first for form in _mac_forms())
    other_home = tmp_path / "other"
    assert machine_id(other_home) != first  # a different salt, an unlinkable id


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080", True),
        ("http://localhost:11434", True),
        ("http://[::1]:8000", True),
        ("http://192.168.1.20:8080", True),
        ("http://10.0.0.5:8000", True),
        ("http://172.20.3.4:1234", True),
        ("http://100.101.102.103:8080", True),
        ("https://gpu-box.tail1234.ts.net", True),
        ("http://gpubox:8080", True),
        ("https://api.openai.com/v1", False),
        ("http://8.8.8.8:8080", False),
        ("http://100.128.0.1:8080", False),
    ],
)
def test_scoring_mode_follows_the_address(url, local):
    assert classify(url).scoring_local is local


def test_overrides_force_the_mode_but_not_hardware_attribution():
    forced = classify("http://192.168.1.20:8080", override="remote")
    assert forced.scoring_local is False
    assert forced.same_machine is False
    assert classify("https://api.example.com", override="local").scoring_local is True
    assert classify("http://127.0.0.1:8080").same_machine is True
    own = socket.gethostname()
    assert classify(f"http://{own}:8080").same_machine is True
