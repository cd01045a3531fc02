"""The host's side loops, in the agent's main process: register, heartbeats, approval, prompts.

A host is given only its own queue (host.<name>) at start. Its job pools are consumed only
once an admin approves it, and dropped again if the approval is withdrawn. A rejected host
key (revoked) stops the whole agent.
"""

from __future__ import annotations

import contextvars
import logging
import os
import signal
import threading

from worker.agent import prompts
from worker.agent.client import KeyRejected, SiteClient
from worker.agent.settings import AgentSettings
from worker.rules.logcontext import log_context

log = logging.getLogger(__name__)
INVENTORY_EVERY = 12  # heartbeats between inventory probes
# How often an idle host looks for quick prompts: a prompt is answered within about this.
PROMPT_POLL_SECONDS = 1.0


class Host:
    def __init__(self, settings: AgentSettings, control) -> None:
        self.settings = settings
        self.control = control  # (add_consumer, cancel_consumer) for this worker's pools
        self.client = SiteClient(settings.site_url, settings.host_key)
        self.stop = threading.Event()
        self.approved = False
        self.consuming = False

    def start(self) -> None:
        with log_context(host=self.settings.host_name):  # on every line of the loops
            for target, name in ((self._heartbeats, "heartbeat"), (self._prompts, "prompts")):
                threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(target,),
                    daemon=True,
                    name=f"benchloop-lab-{name}",
                ).start()

    def _heartbeats(self) -> None:
        beats, registered = 0, False
        while not self.stop.wait(0 if beats == 0 else self.settings.host_heartbeat):
            try:
                if not registered:
                    status = self._register()
                    registered = True
                else:
                    probe = beats % INVENTORY_EVERY == 0
                    inventory = probe_inventory(self.settings.servers) if probe else None
                    status = self.client.post("heartbeat", {"inventory": inventory}, patience=10)
                self._follow_approval(bool(status["approved"]))
            except KeyRejected as exc:
                self._stop_host(str(exc))
                return
            except Exception:  # a site outage must not end the heartbeats
                log.exception("lab heartbeat failed")
            beats += 1

    def _register(self) -> dict:
        from worker.engine.hardware import detect_hardware

        body = {"pools": self.settings.pools, "hardware": detect_hardware()}
        status = self.client.post("register", body, patience=10)
        if status["name"] != self.settings.host_name:
            # Its queue is named after BENCHLOOP_LAB_HOST; the key speaks for another host.
            self._stop_host(f"this key is {status['name']}'s, not {self.settings.host_name}'s")
        log.info("lab host %s registered (approved: %s)", status["name"], status["approved"])
        return status

    def _prompts(self) -> None:
        while not self.stop.wait(PROMPT_POLL_SECONDS):
            if not self.approved:
                continue
            try:
                while prompts.answer_next(self.client) and not self.stop.is_set():
                    pass
            except KeyRejected as exc:
                self._stop_host(str(exc))
                return
            except Exception:  # a site outage must not end the prompt answers
                log.exception("lab quick prompts failed")

    def _follow_approval(self, approved: bool) -> None:
        self.approved = approved
        if approved == self.consuming:
            return
        add, cancel = self.control
        for pool in self.settings.pools:
            (add if approved else cancel)(pool)
        self.consuming = approved
        verb = "now consumes" if approved else "stopped consuming"
        log.info("lab host %s %s its pools %s", self.settings.host_name, verb, self.settings.pools)

    def _stop_host(self, reason: str) -> None:
        log.error("lab host %s stops: %s", self.settings.host_name, reason)
        self.stop.set()
        if self.consuming:
            self._follow_approval(False)
        os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown: the running job ends too


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
