"""Inside a lab worker process: register the host, send heartbeats, follow its approval.

A worker becomes a lab host when BENCHLOOP_LAB_HOST names it. It starts consuming only its
own queue (host.<name>). Its job pools (BENCHLOOP_LAB_POOLS, e.g. "gpu.4090,cpu") are added
only once an admin approves the host, and removed again if the approval is withdrawn.
"""

from __future__ import annotations

import logging
import os
import threading

from celery.signals import worker_ready, worker_shutdown

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = float(os.environ.get("BENCHLOOP_LAB_HEARTBEAT", "5"))
INVENTORY_EVERY = 12  # heartbeats between inventory probes
# How often an idle host looks for quick prompts: a prompt is answered within about this.
PROMPT_POLL_SECONDS = 1.0
_state: dict = {"name": None, "hostname": None, "consuming": False, "stop": threading.Event()}


def current_host_name() -> str | None:
    # Read from the environment, not _state: prefork children exist before worker_ready runs.
    return os.environ.get("BENCHLOOP_LAB_HOST") or None


def _pools() -> list[str]:
    return [p.strip() for p in os.environ.get("BENCHLOOP_LAB_POOLS", "").split(",") if p.strip()]


def _server_urls() -> list[str]:
    return [u.strip() for u in os.environ.get("BENCHLOOP_LAB_SERVERS", "").split(",") if u.strip()]


@worker_ready.connect
def _register(sender=None, **kwargs) -> None:
    name = os.environ.get("BENCHLOOP_LAB_HOST")
    if not name:
        return
    from lab import services
    from worker.engine.hardware import detect_hardware

    _state["name"] = name
    _state["hostname"] = sender.hostname
    host = services.register_host(name=name, pools=_pools(), hardware_info=detect_hardware())
    log.info("lab host %s registered (approved: %s)", name, host.is_approved)
    thread = threading.Thread(
        target=_heartbeat_loop, args=(sender.app,), daemon=True, name="benchloop-lab-heartbeat"
    )
    thread.start()
    # Quick prompts have a consumer of their own, outside the Celery pool that runs the jobs.
    prompts = threading.Thread(target=_prompt_loop, daemon=True, name="benchloop-lab-prompts")
    prompts.start()


@worker_shutdown.connect
def _stop(**kwargs) -> None:
    _state["stop"].set()


def _heartbeat_loop(app) -> None:
    from django.db import connection

    from lab import services

    beats = 0
    while not _state["stop"].wait(0 if beats == 0 else HEARTBEAT_SECONDS):
        try:
            inventory = probe_inventory(_server_urls()) if beats % INVENTORY_EVERY == 0 else None
            host = services.host_heartbeat(name=_state["name"], inventory=inventory)
            if host is not None:
                _follow_approval(app, host.is_approved)
        except Exception:  # a database blip must not end the heartbeats
            log.exception("lab heartbeat failed")
            connection.close()
        beats += 1


def _prompt_loop() -> None:
    from django.db import connection

    from lab.quick import answer_waiting

    while not _state["stop"].wait(PROMPT_POLL_SECONDS):
        try:
            answer_waiting(_state["name"])
        except Exception:  # a database blip must not end the prompt answers
            log.exception("lab quick prompts failed")
            connection.close()


def _follow_approval(app, approved: bool) -> None:
    if approved == _state["consuming"]:
        return
    for pool in _pools():
        if approved:
            app.control.add_consumer(pool, destination=[_state["hostname"]], reply=True)
        else:
            app.control.cancel_consumer(pool, destination=[_state["hostname"]], reply=True)
    _state["consuming"] = approved
    log.info(
        "lab host %s %s its pools %s",
        _state["name"],
        "now consumes" if approved else "stopped consuming",
        _pools(),
    )


def probe_inventory(urls: list[str]) -> list[dict]:
    """The inference servers at the configured URLs and the models each one serves."""
    from worker.engine.detect import detect_endpoint
    from worker.engine.errors import EngineError
    from worker.engine.transport import Transport

    found = []
    for url in urls:
        try:
            with Transport(url, timeout=5, connect_timeout=3) as transport:
                info = detect_endpoint(transport, timeout=3)
        except (EngineError, OSError) as exc:
            found.append({"url": url, "kind": "unreachable", "models": [], "error": str(exc)})
            continue
        found.append({"url": url, "kind": info.kind, "models": list(info.models)})
    return found
