from __future__ import annotations

from django.urls import path

from lab import agent_api, api

agent = "lab/agent/"
urlpatterns = [
    path("jobs", api.JobQueueView.as_view(), name="api-jobs"),
    path("jobs/<int:pk>", api.JobDetailView.as_view(), name="api-job"),
    # The lab agents' own API (worker/rules/protocol.py): host keys only.
    path(f"{agent}register", agent_api.register, name="api-agent-register"),
    path(f"{agent}heartbeat", agent_api.heartbeat, name="api-agent-heartbeat"),
    path(f"{agent}jobs/<int:job_id>/claim", agent_api.claim, name="api-agent-claim"),
    path(
        f"{agent}jobs/<int:job_id>/heartbeat",
        agent_api.job_heartbeat,
        name="api-agent-job-heartbeat",
    ),
    path(f"{agent}jobs/<int:job_id>/running", agent_api.running, name="api-agent-running"),
    path(f"{agent}jobs/<int:job_id>/events", agent_api.events, name="api-agent-events"),
    path(f"{agent}jobs/<int:job_id>/fail", agent_api.fail, name="api-agent-fail"),
    path(f"{agent}jobs/<int:job_id>/requeue", agent_api.requeue, name="api-agent-requeue"),
    path(f"{agent}jobs/<int:job_id>/run", agent_api.upload_run, name="api-agent-upload-run"),
    path(f"{agent}prompts/next", agent_api.next_prompt, name="api-agent-next-prompt"),
    path(
        f"{agent}prompts/<int:prompt_id>/progress",
        agent_api.prompt_progress,
        name="api-agent-prompt-progress",
    ),
    path(
        f"{agent}prompts/<int:prompt_id>/answer",
        agent_api.prompt_answer,
        name="api-agent-prompt-answer",
    ),
    path(
        f"{agent}prompts/<int:prompt_id>/failed",
        agent_api.prompt_failed,
        name="api-agent-prompt-failed",
    ),
]
