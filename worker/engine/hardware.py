"""Hardware detection: CPU/RAM/OS via psutil, NVIDIA GPUs via NVML, Apple Silicon via sysctl."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import platform
import secrets
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from ..rules.contract import GpuInfo, Hardware
from .paths import benchloop_home

_GIB = 1024**3


def detect_hardware(
    *,
    attributed: bool = True,
    label: str | None = None,
    gpu: str | None = None,
    gpu_memory_gb: float | None = None,
) -> Hardware:
    """Describe this machine; with ``attributed=False`` only the user's overrides are kept.

    ``attributed`` is False when the benchmarked server runs elsewhere: this machine's CPU and
    GPU say nothing about it, so nothing is claimed.
    """
    overrides = {
        key: value
        for key, value in (("label", label), ("gpu", gpu), ("gpu_memory_gb", gpu_memory_gb))
        if value not in (None, "")
    }
    hw = Hardware(
        attributed=attributed,
        os="",
        os_version="",
        architecture="",
        cpu_model="",
        cpu_physical_cores=None,
        cpu_logical_cores=None,
        ram_gb=None,
        gpus=[],
        gpu_driver_version="",
        cuda_version="",
        apple_silicon=False,
        gpu_source="none",
        notes=[],
        overrides=overrides,
        label="",  # named last, from what was found
    )
    if attributed:
        _fill_host(hw)
        if hw["os"] == "Darwin" and hw["architecture"] == "arm64":
            _fill_apple(hw)
        else:
            _fill_nvml(hw)
    if gpu:
        hw["gpus"] = [{"index": 0, "name": gpu, "vram_gb": gpu_memory_gb}]
        hw["gpu_source"] = "override"
    elif gpu_memory_gb is not None and hw["gpus"]:
        hw["gpus"][0]["vram_gb"] = gpu_memory_gb
    hw["label"] = label or hardware_label(hw)
    return hw


def _fill_host(hw: Hardware) -> None:
    hw["os"] = platform.system()
    hw["os_version"] = platform.mac_ver()[0] if hw["os"] == "Darwin" else platform.release()
    hw["architecture"] = platform.machine()
    hw["cpu_model"] = _cpu_model()
    hw["cpu_physical_cores"] = psutil.cpu_count(logical=False)
    hw["cpu_logical_cores"] = psutil.cpu_count(logical=True)
    hw["ram_gb"] = round(psutil.virtual_memory().total / _GIB, 2)


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Model") and value.strip():
                return value.strip()
    if platform.system() == "Darwin":
        brand = _sysctl("machdep.cpu.brand_string")
        if brand:
            return brand
    return platform.processor() or platform.machine()


def _sysctl(key: str) -> str:
    try:
        out = subprocess.run(
            ["sysctl", "-n", key], capture_output=True, text=True, timeout=3, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _fill_apple(hw: Hardware) -> None:
    """Apple Silicon: the GPU shares system memory, so its memory is the machine's RAM."""
    chip = _sysctl("machdep.cpu.brand_string") or "Apple Silicon"
    memsize = _sysctl("hw.memsize")
    ram_gb = round(int(memsize) / _GIB, 2) if memsize.isdigit() else hw["ram_gb"]
    perf, eff = _sysctl("hw.perflevel0.physicalcpu"), _sysctl("hw.perflevel1.physicalcpu")
    hw["apple_silicon"] = True
    hw["cpu_model"] = chip
    hw["ram_gb"] = ram_gb
    hw["gpu_source"] = "sysctl"
    if perf.isdigit():
        hw["cpu_performance_cores"] = int(perf)
    if eff.isdigit():
        hw["cpu_efficiency_cores"] = int(eff)
    hw["gpus"] = [GpuInfo(index=0, name=f"{chip} GPU", vram_gb=ram_gb, memory="unified")]


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _fill_nvml(hw: Hardware) -> None:
    """Every NVIDIA GPU through NVML; any NVML failure leaves a note and no GPU, never a crash."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        hw["notes"].append("NVML not available: nvidia-ml-py is not installed")
        return
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses differ between driver setups
        hw["notes"].append(f"NVML not available: {exc}")
        return
    try:
        hw["gpu_driver_version"] = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            getter = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None)
            cuda = (getter or nvml.nvmlSystemGetCudaDriverVersion)()
            hw["cuda_version"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        except Exception as exc:
            hw["notes"].append(f"CUDA version unknown: {exc}")
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            entry = GpuInfo(index=index, name=_text(nvml.nvmlDeviceGetName(handle)), vram_gb=None)
            # Some boards (unified-memory Grace parts) report no framebuffer size: None stays.
            with contextlib.suppress(Exception):
                entry["vram_gb"] = round(nvml.nvmlDeviceGetMemoryInfo(handle).total / _GIB, 2)
            hw["gpus"].append(entry)
        hw["gpu_source"] = "nvml"
    except Exception as exc:
        hw["notes"].append(f"NVML query failed: {exc}")
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def hardware_label(hw: Mapping[str, Any]) -> str:
    """A short human label: '2× NVIDIA H100 80GB', 'Apple M2 Max 64GB', or CPU + RAM."""
    gpus = hw.get("gpus") or []
    if gpus:
        names = [g.get("name", "") for g in gpus]
        vram = gpus[0].get("vram_gb")
        size = f" {round(vram)}GB" if vram else ""
        count = f"{len(gpus)}× " if len(gpus) > 1 and len(set(names)) == 1 else ""
        if len(set(names)) > 1:
            return " + ".join(names)
        return f"{count}{names[0]}{size}"
    if hw.get("cpu_model"):
        ram = f" {round(hw['ram_gb'])}GB RAM" if hw.get("ram_gb") else ""
        return f"{hw['cpu_model']}{ram}"
    return ""


def _raw_machine_identity() -> str:
    for candidate in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            value = Path(candidate).read_text().strip()
        except OSError:
            continue
        if value:
            return value
    if platform.system() == "Darwin":
        return _sysctl("kern.uuid")
    return ""


def machine_id(home: Path | None = None) -> str:
    """A stable pseudonymous id: sha256 over a local random salt and the OS machine id.

    The salt never leaves this machine, so the id cannot be linked back to the OS id or to any
    network hardware address (which is never read).
    """
    home = home or benchloop_home()
    salt_path = home / "machine-salt"
    try:
        salt = salt_path.read_text().strip()
    except OSError:
        salt = ""
    if not salt:
        salt = secrets.token_hex(32)
        tmp = salt_path.with_name(".machine-salt.tmp")
        try:
            home.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(salt + "\n")
            os.replace(tmp, salt_path)  # never an empty salt file, even on a full disk
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise OSError(exc.errno, f"could not save {salt_path}: {exc.strerror}") from exc
    digest = hashlib.sha256(f"{salt}:{_raw_machine_identity()}".encode()).hexdigest()
    return f"sha256:{digest}"
