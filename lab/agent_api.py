"""/api/v1/lab/agent/…: the only way a lab host's agent reaches the site (host key, no DB).

Each call names the host by its key, never by what it says: a host reports only on the jobs
it claimed and answers only its own prompts. Requests are validated here; the workflows are
in lab.services (jobs) and lab.agents (keys, prompts).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions, serializers
from rest_framework.decorators import (
    api_view,
    authentication_classes,
    permission_classes,
    throttle_classes,
)
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from core.errors import ApiError
from core.throttling import CountingThrottle
from lab import agents, services
from lab.models import BenchmarkJob, HostKey, WorkerHost
from submissions.api import read_json_body, validate_upload
from worker.rules.protocol import (
    LIVE_ONLY_EVENTS,
    MAX_EVENT_BYTES,
    MAX_EVENTS_PER_JOB,
    MAX_EVENTS_PER_POST,
    HostStatus,
    JobState,
)
from worker.rules.validate import BadEvent, check_event


class AgentRequest(Request):
    """A request past IsAgent: its `auth` is the host's key (its user is anonymous)."""

    auth: HostKey


class HostKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer blh_…`; a revoked key is a 401, which stops the agent."""

    def authenticate(self, request: Request):
        scheme, _, key = (
            authentication.get_authorization_header(request).decode("latin-1").partition(" ")
        )
        if scheme != "Bearer" or not key.strip():
            return None
        try:
            return AnonymousUser(), agents.authenticate(key.strip())
        except agents.KeyRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="lab-agent"'


class IsAgent(BasePermission):
    message = "A lab host key with the 'agent' scope is needed."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, HostKey) and request.auth.has_scope("agent")


class AgentThrottle(CountingThrottle):
    """Per host key: a runaway agent costs the site a bounded number of requests."""

    scope = "lab_agent"

    def get_cache_key(self, request, view) -> str | None:
        if not isinstance(request.auth, HostKey):
            return None
        return f"throttle:lab_agent:{request.auth.pk}"


def agent_view(*methods: str):
    """An agent endpoint: host key, agent scope, its throttle, outside the public schema."""

    def wrap(view):
        for decorate in (
            throttle_classes([AgentThrottle]),
            permission_classes([IsAgent]),
            authentication_classes([HostKeyAuthentication]),
            api_view(list(methods)),
            extend_schema(exclude=True),
        ):
            view = decorate(view)
        return view

    return wrap


class Words(serializers.CharField):
    """An endpoint's or a model's own words: a NUL or a lone surrogate in them is replaced
    when stored (runs.bounds.storable_text), never a reason to lose the answer."""

    def __init__(self, **kwargs) -> None:
        super().__init__(allow_blank=True, trim_whitespace=False, **kwargs)
        self.validators = [v for v in self.validators if "Prohibit" not in type(v).__name__]


def _valid(serializer: serializers.Serializer) -> dict:
    if not serializer.is_valid():
        fields = [
            {"path": name, "message": " ".join(str(m) for m in messages)}
            for name, messages in serializer.errors.items()
        ]
        raise ApiError(400, "invalid", "The request does not match the agent protocol.", fields)
    return dict(serializer.validated_data)


def _host(request: AgentRequest) -> WorkerHost:
    host = agents.host_of(request.auth)
    if host is None:
        raise ApiError(409, "not_registered", "Register this host first.")
    return host


def _status(host: WorkerHost) -> HostStatus:
    return {
        "name": host.name,
        "approved": host.is_approved,
        "pools": list(host.pools),
        "heartbeat_seconds": float(settings.BENCHLOOP_JOB_HEARTBEAT_SECONDS),
        "stale_seconds": float(settings.BENCHLOOP_JOB_STALE_SECONDS),
    }


class _Register(serializers.Serializer):
    pools = serializers.ListField(child=serializers.CharField(max_length=64), max_length=50)
    hardware = serializers.DictField(required=False, default=dict)


@agent_view("POST")
def register(request: AgentRequest) -> Response:
    data = _valid(_Register(data=request.data))
    try:
        host = services.register_host(
            name=request.auth.host_name, pools=data["pools"], hardware_info=data["hardware"]
        )
    except ValueError as exc:
        raise ApiError(400, "invalid", str(exc)) from None
    return Response(_status(host))


class _Heartbeat(serializers.Serializer):
    inventory = serializers.ListField(
        child=serializers.DictField(), max_length=50, required=False, allow_null=True
    )


@agent_view("POST")
def heartbeat(request: AgentRequest) -> Response:
    data = _valid(_Heartbeat(data=request.data))
    host = services.host_heartbeat(name=_host(request).name, inventory=data.get("inventory"))
    if host is None:  # deleted (by an admin) since _host found it
        raise ApiError(409, "not_registered", "Register this host first.")
    return Response(_status(host))


@agent_view("POST")
def claim(request: AgentRequest, job_id: int) -> Response:
    host = _host(request)
    if not host.is_approved:
        raise ApiError(403, "not_approved", "This host is not approved yet.")
    job = services.claim_job(job_id=job_id, host=host)
    if job is None:
        raise ApiError(409, "not_claimable", "Already taken, finished, cancelled or not yours.")
    return Response(agents.job_spec(job))


class _Attempt(serializers.Serializer):
    attempt = serializers.IntegerField(min_value=1, max_value=1000)


def _job_state(job_id: int, attempt: int) -> JobState:
    return {
        "ours": services.still_ours(job_id=job_id, attempt=attempt),
        "cancel": services.cancel_requested(job_id),
    }


def _owned_attempt(request: AgentRequest, job_id: int, serializer=_Attempt) -> dict:
    """The request's fields, once the job is known to be this host's claim."""
    data = _valid(serializer(data=request.data))
    if not agents.owns(_host(request), job_id):
        get_object_or_404(BenchmarkJob, pk=job_id)  # a 404 for a job that does not exist
        raise ApiError(403, "not_yours", "This job is claimed by another host.")
    return data


@agent_view("POST")
def job_heartbeat(request: AgentRequest, job_id: int) -> Response:
    data = _owned_attempt(request, job_id)
    services.heartbeat(job_id=job_id, attempt=data["attempt"])
    return Response(_job_state(job_id, data["attempt"]))


@agent_view("POST")
def running(request: AgentRequest, job_id: int) -> Response:
    data = _owned_attempt(request, job_id)
    services.mark_running(job_id=job_id, attempt=data["attempt"])
    return Response(_job_state(job_id, data["attempt"]))


class _Sequenced(serializers.Serializer):
    seq = serializers.IntegerField(min_value=1, max_value=10_000_000)
    event = serializers.DictField()


class _Events(_Attempt):
    events = serializers.ListField(child=_Sequenced(), max_length=MAX_EVENTS_PER_POST)
    live = serializers.DictField(required=False, allow_null=True)


def _checked_events(data: dict) -> tuple[list[tuple[int, dict]], dict | None]:
    """The posted events and live tick as the protocol's types describe them; a 400 naming
    every field that is not (worker/rules/validate.py)."""
    problems, events = [], []
    for i, item in enumerate(data["events"]):
        try:
            events.append((item["seq"], check_event(item["event"], f"events[{i}].event")))
        except BadEvent as bad:
            problems.append({"path": bad.path, "message": bad.message})
    live = data.get("live") or None
    if live is not None:
        try:
            live = check_event(live, "live", allowed=LIVE_ONLY_EVENTS)
        except BadEvent as bad:
            problems.append({"path": bad.path, "message": bad.message})
    if problems:
        raise ApiError(
            400,
            "invalid",
            "The events do not match the agent protocol (an event is at most "
            f"{MAX_EVENT_BYTES} bytes; a job keeps at most {MAX_EVENTS_PER_JOB} events).",
            problems,
        )
    return events, live


@agent_view("POST")
def events(request: AgentRequest, job_id: int) -> Response:
    """Events in order, each once (a replay after a lost answer is ignored by its seq); `live`
    is the latest progress tick, which moves the live numbers and is not kept. Only the job's
    current attempt, while it runs, may post: anything else is a 409 and stores nothing."""
    data = _owned_attempt(request, job_id, _Events)
    attempt = data["attempt"]
    events, live = _checked_events(data)
    try:
        services.record_events(
            job_id=job_id, host=_host(request), attempt=attempt, events=events, live=live
        )
    except services.JobClosed as exc:
        raise ApiError(409, "not_current", str(exc)) from None
    except services.EventLimit as exc:
        raise ApiError(409, "event_limit", str(exc)) from None
    return Response(_job_state(job_id, attempt))


class _Ending(_Attempt):
    error = Words(max_length=20000)
    cancelled = serializers.BooleanField(default=False)


@agent_view("POST")
def fail(request: AgentRequest, job_id: int) -> Response:
    data = _owned_attempt(request, job_id, _Ending)
    job = services.fail_job(
        job_id=job_id, attempt=data["attempt"], error=data["error"], cancelled=data["cancelled"]
    )
    return Response({"status": job.status})


@agent_view("POST")
def requeue(request: AgentRequest, job_id: int) -> Response:
    data = _owned_attempt(request, job_id, _Ending)
    requeued = services.requeue_job(job_id=job_id, attempt=data["attempt"], error=data["error"])
    return Response({"requeued": requeued})


@agent_view("POST")
def upload_run(request: AgentRequest, job_id: int) -> Response:
    """The finished bundle, read and checked exactly as POST /api/v1/runs reads and checks
    every upload, stored by the same service. It is a verified run only because the site says
    so: the key has the verify scope, and the job is still this host's attempt, running, not
    cancelled (services.finish_job decides, in the transaction that stores it); else a 409."""
    if not request.auth.has_scope("verify"):
        raise ApiError(403, "forbidden", "This host key lacks the 'verify' scope.")
    attempt = _valid(_Attempt(data=request.query_params))["attempt"]
    if not agents.owns(_host(request), job_id):
        raise ApiError(403, "not_yours", "This job is claimed by another host.")
    data = read_json_body(request)
    # A lab run's id is its job's: a second upload of the same job stores nothing new.
    data["client_run_id"] = f"lab-job-{job_id}"
    upgraded = validate_upload(data)
    try:
        job = services.finish_job(
            job_id=job_id, host=_host(request), attempt=attempt, upload=data, upgraded=upgraded
        )
    except services.JobClosed as exc:
        raise ApiError(409, "not_current", str(exc)) from None
    return Response({"status": job.status, "run": job.run_id}, status=201 if job.run_id else 200)


@agent_view("POST")
def next_prompt(request: AgentRequest) -> Response:
    host = _host(request)
    if not host.is_approved:
        return Response(status=204)
    spec = agents.claim_prompt(host)
    return Response(spec) if spec else Response(status=204)


class _Progress(serializers.Serializer):
    tokens = serializers.IntegerField(min_value=0, max_value=10_000_000)
    seconds = serializers.FloatField(min_value=0, max_value=86400)


class _Answer(serializers.Serializer):
    reply = Words(max_length=200_000)
    ttft_ms = serializers.FloatField(min_value=0, max_value=1e9, required=False, allow_null=True)
    decode_tps = serializers.FloatField(min_value=0, max_value=1e9, required=False, allow_null=True)


class _Failure(serializers.Serializer):
    error = Words(max_length=20000)


@agent_view("POST")
def prompt_progress(request: AgentRequest, prompt_id: int) -> Response:
    data = _valid(_Progress(data=request.data))
    return Response(
        {"ours": agents.prompt_progress(host=_host(request), prompt_id=prompt_id, **data)}
    )


@agent_view("POST")
def prompt_answer(request: AgentRequest, prompt_id: int) -> Response:
    data = _valid(_Answer(data=request.data))
    stored = agents.finish_prompt(
        host=_host(request),
        prompt_id=prompt_id,
        reply=data["reply"],
        ttft_ms=data.get("ttft_ms"),
        decode_tps=data.get("decode_tps"),
    )
    return Response({"ours": stored})


@agent_view("POST")
def prompt_failed(request: AgentRequest, prompt_id: int) -> Response:
    data = _valid(_Failure(data=request.data))
    return Response(
        {"ours": agents.fail_prompt(host=_host(request), prompt_id=prompt_id, error=data["error"])}
    )
