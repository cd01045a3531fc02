"""The agent's configuration, from its environment (no Django settings, no database URL)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _secret(name: str) -> str:
    """NAME, or the contents of the file NAME_FILE names (a docker secret)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, "").strip()


@dataclass(frozen=True)
class AgentSettings:
    site_url: str
    host_key: str
    host_name: str
    pools: list[str] = field(default_factory=list)
    servers: list[str] = field(default_factory=list)
    host_heartbeat: float = 5.0
    job_heartbeat: float = 5.0
    jobs_root: Path = Path("var/lab-jobs")

    @classmethod
    def from_environment(cls) -> AgentSettings:
        missing = [
            name
            for name, value in (
                ("BENCHLOOP_SITE_URL", os.environ.get("BENCHLOOP_SITE_URL")),
                ("BENCHLOOP_HOST_KEY", _secret("BENCHLOOP_HOST_KEY")),
                ("BENCHLOOP_LAB_HOST", os.environ.get("BENCHLOOP_LAB_HOST")),
            )
            if not value
        ]
        if missing:
            raise SystemExit(f"the lab agent needs {', '.join(missing)} in its environment")
        var = Path(os.environ.get("BENCHLOOP_VAR_DIR", "var"))
        return cls(
            site_url=os.environ["BENCHLOOP_SITE_URL"],
            host_key=_secret("BENCHLOOP_HOST_KEY"),
            host_name=os.environ["BENCHLOOP_LAB_HOST"],
            pools=_list("BENCHLOOP_LAB_POOLS"),
            servers=_list("BENCHLOOP_LAB_SERVERS"),
            host_heartbeat=float(os.environ.get("BENCHLOOP_LAB_HEARTBEAT", "5")),
            job_heartbeat=float(os.environ.get("BENCHLOOP_JOB_HEARTBEAT_SECONDS", "5")),
            jobs_root=Path(os.environ.get("BENCHLOOP_LAB_JOBS_DIR", var / "lab-jobs")),
        )


def broker_config() -> dict:
    """Celery settings for the agent: the site's broker, the site's delivery guarantees."""
    url = os.environ.get("BENCHLOOP_BROKER_URL") or os.environ.get("CELERY_BROKER_URL", "")
    if not url:
        raise SystemExit("the lab agent needs BENCHLOOP_BROKER_URL (the site's broker)")
    if url.startswith("filesystem://"):
        folder = Path(os.environ.get("BENCHLOOP_BROKER_DIR", "var/broker"))
        options: dict = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        }
    else:
        # As on the site: longer than the longest job, or Redis redelivers a running job.
        options = {
            "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", 4 * 3600)),
            "queue_order_strategy": "priority",
            "priority_steps": list(range(10)),
        }
        if os.environ.get("CELERY_BROKER_KEY_PREFIX"):
            options["global_keyprefix"] = os.environ["CELERY_BROKER_KEY_PREFIX"]
    return {
        "broker_url": url,
        "broker_transport_options": options,
        "broker_connection_retry_on_startup": True,
        "task_ignore_result": True,
        "task_acks_late": True,
        "worker_prefetch_multiplier": 1,
        # A broker restart must not cancel a running benchmark (lab/tests/test_redis_restart.py).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
    }
