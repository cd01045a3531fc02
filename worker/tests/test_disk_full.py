"""Fault drill: the disk fills up while a run bundle is written.

A real full disk is a tiny tmpfs mounted for the test (worker/tests/disk.py; needs root or
CAP_SYS_ADMIN, which the CI container has; elsewhere those tests skip). A file-size limit
(RLIMIT_FSIZE, EFBIG) gives the same failure without privileges, so the writer's contract is
checked everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.engine.bundle import write_bundle
from worker.engine.errors import BundleWriteError
from worker.engine.hardware import machine_id
from worker.tests.disk import fill, tmpfs

pytestmark = pytest.mark.drill
REPO = Path(__file__).resolve().parents[2]
PAGE = 4096


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 256 KiB tmpfs at tmp_path/disk, unmounted afterwards."""
    with tmpfs(tmp_path / "disk", "256k") as mount_point:
        yield mount_point


def _bundle(tasks: int) -> dict:
    return {"run_id": "drill", "status": "running", "tasks": ["x" * 100] * tasks}


def test_a_full_disk_keeps_the_previous_bundle_and_names_the_file(small_disk) -> None:
    path = small_disk / "runs" / "drill" / "run.json"
    write_bundle(_bundle(1), path)
    before = path.read_bytes()
    fill(small_disk, leave=PAGE)

    with pytest.raises(BundleWriteError) as caught:
        write_bundle(_bundle(200), path)  # ~20 KiB: more than the one page left

    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value).startswith(
        f"could not save the run bundle {path}: no space left on device."
    )
    assert "previous copy of the bundle is unchanged" in str(caught.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.json"]  # no temp file left


_UNDER_A_SIZE_LIMIT = """
import json, resource, signal, sys
from pathlib import Path
from worker.engine.bundle import write_bundle
from worker.engine.errors import BundleWriteError
from worker.engine.hardware import machine_id

path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write with EFBIG, not the process
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_bundle({"tasks": ["x" * 100] * 200}, path)
except BundleWriteError as exc:
    print(json.dumps({"errno": exc.errno, "message": str(exc)}))
"""


def test_a_file_size_limit_fails_the_write_the_same_way(tmp_path) -> None:
    path = tmp_path / "runs" / "drill" / "run.json"
    write_bundle(_bundle(1), path)
    before = path.read_bytes()

    done = subprocess.run(
        [sys.executable, "-c", _UNDER_A_SIZE_LIMIT, str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    reported = json.loads(done.stdout)
    assert reported["errno"] == errno.EFBIG
    assert reported["message"].startswith(f"could not save the run bundle {path}: file too large")
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.json"]


@pytest.mark.llm
def test_benchloop_run_on_a_disk_that_fills_up_mid_run_says_so_and_keeps_the_bundles(
    small_disk, llm_url, llm_model
) -> None:
    home = small_disk / "home"
    earlier = home / "runs" / "20260101-000000-earlier" / "run.json"
    write_bundle({"run_id": "earlier", "status": "complete"}, earlier)
    earlier_bytes = earlier.read_bytes()
    runs = home / "runs"

    def fill_once_the_run_has_its_first_bundle() -> None:
        # The run writes its bundle at the start and after every task: take the last of the
        # space right after the first write, so a later one is what hits the full disk.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(p.parent != earlier.parent for p in runs.glob("*/run.json")):
                fill(small_disk)
                return
            time.sleep(0.005)

    filler = threading.Thread(target=fill_once_the_run_has_its_first_bundle)
    filler.start()
    env = {**os.environ, "BENCHLOOP_HOME": str(home), "COLUMNS": "300"}
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run", "--url", llm_url, "--model", llm_model]
        + ["--tasks", "speed-p128-n256,speed-p512-n16", "--trials", "1"]
        + ["--max-tokens", "16"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    filler.join(timeout=130)

    assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-2000:])
    message = " ".join(done.stderr.split())  # Rich may wrap the line
    assert "error: could not save the run bundle" in message, done.stderr
    assert "no space left on device" in message
    assert "hint: The previous copy of the bundle is unchanged" in message
    assert "Traceback" not in done.stderr
    assert earlier.read_bytes() == earlier_bytes
    (this_run,) = [p for p in runs.iterdir() if p != earlier.parent]
    assert sorted(p.name for p in this_run.iterdir()) == ["run.json"]  # no temp file left
    kept = json.loads((this_run / "run.json").read_text())  # whole, not truncated
    assert kept["status"] == "incomplete" and kept["run_id"] == this_run.name


def test_a_full_disk_at_the_first_run_names_the_salt_file_and_leaves_no_empty_one(
    small_disk,
) -> None:
    home = small_disk / "home"
    home.mkdir()
    fill(small_disk)
    with pytest.raises(OSError) as caught:
        machine_id(home)
    assert caught.value.errno == errno.ENOSPC
    assert f"could not save {home / 'machine-salt'}" in str(caught.value)
    # An empty salt file would silently give this machine a new id on every later run.
    assert list(home.iterdir()) == []
