from __future__ import annotations

from django.urls import path

from lab import agent_api, api

agent = "lab/agent/"
urlpatterns = [
    path("jobs", api.JobQueueView.as_view(), name="api-jobs"),
    path("jobs/<int:pk>", api.JobDetailView.as_view(), name="api-job"),
    # The lab agents' own API (worker/agent/protocol.py): host keys only.
    path(f"{agent}register", agent_api.register),
    path(f"{agent}heartbeat", agent_api.heartbeat),
    path(f"{agent}jobs/<int:job_id>/claim", agent_api.claim),
    path(f"{agent}jobs/<int:job_id>/heartbeat", agent_api.job_heartbeat),
    path(f"{agent}jobs/<int:job_id>/running", agent_api.running),
    path(f"{agent}jobs/<int:job_id>/events", agent_api.events),
    path(f"{agent}jobs/<int:job_id>/fail", agent_api.fail),
    path(f"{agent}jobs/<int:job_id>/requeue", agent_api.requeue),
    path(f"{agent}jobs/<int:job_id>/run", agent_api.upload_run),
    path(f"{agent}prompts/next", agent_api.next_prompt),
    path(f"{agent}prompts/<int:prompt_id>/progress", agent_api.prompt_progress),
    path(f"{agent}prompts/<int:prompt_id>/answer", agent_api.prompt_answer),
    path(f"{agent}prompts/<int:prompt_id>/failed", agent_api.prompt_failed),
]
