"""A verified lab run's hardware is the host's approved machine (issue 31, defect 4): a host
approved as one machine that uploads a bundle naming another gets a self-reported run, held
for the moderators with the difference, and its job page says why it is not verified. Each
test drives the real agent API (URLs, views, services) on the test database."""

from __future__ import annotations

import copy
import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from lab import agents, services
from lab.models import BenchmarkJob, WorkerHost
from lab.tests.test_agent_trust import JOB, SMOKE_MACHINE, _post, _registered
from runs.models import Run

pytestmark = pytest.mark.django_db
RTX_3060 = {
    "cpu_model": "AMD Ryzen 5 5600X 6-Core Processor",
    "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3060", "vram_gb": 12.0}],
    "ram_gb": 31.2,
    "os": "Linux",
}


def _run_of_a_job(operator, hardware: dict, bundle: dict) -> tuple[BenchmarkJob, Run]:
    """lab-cpu, approved as `hardware`, claims a job and uploads `bundle` for it."""
    key = _registered("lab-cpu", ["cpu"], hardware)
    job = services.queue_job(requested_by=operator, **JOB)
    assert _post(f"jobs/{job.pk}/claim", {}, key).json()["attempt"] == 1
    answer = _post(f"jobs/{job.pk}/run?attempt=1", bundle, key)
    assert answer.status_code == 201, answer.content
    job.refresh_from_db()
    return job, Run.objects.select_related("submission", "hardware").get(pk=job.run_id)


def _result_line(job: BenchmarkJob) -> str:
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    found = re.search(r"<p[^>]*>(Result: .*?)</p>", page, re.S)
    assert found, page
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def test_a_bundle_naming_an_h100_from_a_host_approved_as_an_rtx_3060_is_self_reported(
    operator, lab_hosts, smoke_run, bob_client
) -> None:
    h100 = copy.deepcopy(smoke_run)
    h100["machine"].update(gpu="NVIDIA H100 80GB HBM3", gpu_memory_gb=80.0)
    h100["machine"]["hardware_label"] = "NVIDIA H100 80GB HBM3"
    job, run = _run_of_a_job(operator, RTX_3060, h100)
    assert job.status == "succeeded"
    assert not run.is_verified and "H100" in run.hardware.gpu_model
    # Held for a moderator, with what differs.
    assert run.submission.status == "flagged" and not run.published
    (reason,) = [r for r in run.submission.flag_reasons if r.startswith("Hardware differs")]
    assert "RTX 3060" in reason and "H100" in reason and "lab-cpu" in reason, reason
    queue = bob_client.get("/moderation/").content.decode()
    assert "Hardware differs from the lab host&#x27;s approved machine" in queue
    assert "H100" in queue and "RTX 3060" in queue
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "root@example.org", "x"))
    page = admin.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert "Hardware differs from the lab host&#x27;s approved machine: lab-cpu" in page
    assert _result_line(job) == (
        f"Result: run #{run.pk} (measured on other hardware than the host's approved "
        "machine: self-reported)"
    )


def test_a_bundle_from_the_approved_machine_is_verified(operator, lab_hosts, smoke_run) -> None:
    job, run = _run_of_a_job(operator, SMOKE_MACHINE, smoke_run)
    assert run.is_verified and run.published and run.submission.status == "approved"
    assert run.submission.flag_reasons == []
    assert run.hardware == WorkerHost.objects.get(name="lab-cpu").hardware
    assert _result_line(job) == f"Result: verified run #{run.pk}"


@pytest.mark.parametrize(
    "change",
    [
        {"gpu": "NVIDIA RTX 4090, NVIDIA RTX 4090", "gpu_memory_gb": 48.0},  # a second card
        {"gpu_memory_gb": 48.0},  # more memory on the card
        {"cpu": "AMD EPYC 9654 96-Core Processor"},
        {"system_memory_gb": 512.0},
    ],
)
def test_any_other_machine_is_self_reported(change, operator, lab_hosts, smoke_run) -> None:
    other = copy.deepcopy(smoke_run)
    other["machine"].update(change)
    _job, run = _run_of_a_job(operator, SMOKE_MACHINE, other)
    assert not run.is_verified and run.submission.status == "flagged"
    assert any(r.startswith("Hardware differs") for r in run.submission.flag_reasons)


def test_a_host_registered_with_two_cards_is_approved_as_both(operator, lab_hosts, smoke_run):
    """The registration counts every card's memory, as a bundle does: a two-card host's own
    runs are verified."""
    card = SMOKE_MACHINE["gpus"][0]
    two = {**SMOKE_MACHINE, "gpus": [card, {**card, "index": 1}]}
    bundle = copy.deepcopy(smoke_run)
    bundle["machine"].update(gpu="NVIDIA RTX 4090, NVIDIA RTX 4090", gpu_memory_gb=48.0)
    _job, run = _run_of_a_job(operator, two, bundle)
    assert run.is_verified, run.submission.flag_reasons
    assert (run.hardware.gpu_count, run.hardware.vram_gb) == (2, 48.0)


@pytest.mark.parametrize(
    "hardware",
    [
        {"gpus": 5},
        {"gpus": [{"name": 5, "vram_gb": "x"}, "card"], "ram_gb": "lots", "cpu_model": ["x"]},
        {"gpus": [{"name": "NVIDIA RTX 4090", "vram_gb": float("1e308")}], "ram_gb": -1},
    ],
)
def test_a_registration_that_describes_hardware_oddly_is_stored_as_unknown(hardware) -> None:
    """The registration is the agent's word: what is not a name or a size is unknown, never
    a 500."""
    key = agents.create_host_key(host_name="lab-odd", user=None)[1]
    answer = _post("register", {"pools": ["cpu"], "hardware": hardware}, key)
    assert answer.status_code == 200, answer.content
    machine = WorkerHost.objects.get(name="lab-odd").hardware
    assert machine.vram_gb is None and machine.ram_gb is None
