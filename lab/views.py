"""Lab pages: the public queue and job pages, and the operators' forms and host list."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.contrib.syndication.views import Feed
from django.core.paginator import Paginator
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import escape
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from core.conditional import revalidated
from core.feeds import XmlSafeAtomFeed
from core.formlimits import limit_posts
from core.http import SignedInRequest
from lab import agents, services
from lab.access import (
    OPERATE,
    can_administer_hosts,
    can_cancel_job,
    can_operate,
    is_job_insider,
)
from lab.forms import HostKeyForm, JobForm, NotificationForm, QuickPromptForm
from lab.models import (
    BenchmarkJob,
    HostKey,
    JobEvent,
    NotificationSettings,
    QuickPrompt,
    WorkerHost,
)
from worker.rules.redact import redact_text


@require_safe
def queue(request: HttpRequest) -> HttpResponse:
    """Public: what is running, what waits, what finished (no endpoints, no recipes)."""
    jobs = BenchmarkJob.objects.select_related("host")
    running = list(
        jobs.filter(status__in=[BenchmarkJob.Status.CLAIMED, BenchmarkJob.Status.RUNNING]).order_by(
            "started_at"
        )
    )
    pending = list(
        jobs.filter(status=BenchmarkJob.Status.QUEUED).order_by("-priority", "created_at")[:100]
    )
    finished = Paginator(jobs.finished().order_by("-finished_at"), 25).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "worker/queue.html",
        {
            "running": running,
            "pending": pending,
            "finished": finished,
            "can_operate": can_operate(request.user),
        },
    )


@require_safe
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(BenchmarkJob.objects.select_related("host", "run"), pk=pk)
    # Every attempt's events, newest attempt first: a lost worker's story stays readable.
    events = list(JobEvent.objects.filter(job=job).order_by("-attempt", "-seq")[:300])
    insider = is_job_insider(request.user, job)
    context = {
        "job": job,
        "events": events,
        "can_operate": can_operate(request.user),
        "raw_error": insider,
        # Cancelling is the requester's or an operator's, and only while the job can change;
        # decided here so the polled partial drops the button once the job is final.
        "can_cancel": can_cancel_job(request.user, job),
        # Receivers' URLs are the requester's own: nobody else sees the deliveries.
        "deliveries": list(job.deliveries.order_by("created_at")) if insider else [],
        "shared_prompts": job.shared_with_prompts.count(),
    }
    if getattr(request, "htmx", False):
        response = render(request, "worker/job.html#progress", context)
        # Stop polling once the job can no longer change.
        return HttpResponseStopPolling(response.content) if job.is_final else response
    return render(request, "worker/job.html", context)


def _inventory_choices() -> list[tuple[str, str]]:
    choices = []
    for host in WorkerHost.objects.approved():
        for server in host.inventory:
            for model in server.get("models", []):
                choices.append(
                    (
                        f"{server['url']}|{model}|{host.name}",
                        f"{host.name} · {server.get('kind')} · {model}",
                    )
                )
    return choices


@login_required
@permission_required(OPERATE, raise_exception=True)
@limit_posts("lab_job")
def new_job(request: SignedInRequest) -> HttpResponse:
    form = JobForm(
        request.POST or None, servers=_inventory_choices(), pools=services.served_pools()
    )
    if request.method == "POST" and form.is_valid():
        fields = {name: form.cleaned_data[name] for name in form.Meta.fields}
        job = services.queue_job(
            requested_by=request.user,
            launch_flags=form.instance.launch_flags,
            suites=form.instance.suites,
            **fields,
        )
        placement = cast(services.Placement, form.placement)  # a valid form has placed its job
        host = placement.hosts[0]
        where = f"host {host.name}" if job.pool == host.queue_name else f"pool {job.pool}"
        messages.success(request, f"Job {job.pk} queued on {where}.")
        if placement.warning:
            messages.warning(request, placement.warning)
        return redirect("lab:job", pk=job.pk)
    return render(request, "worker/new_job.html", {"form": form})


@require_POST
@login_required
def cancel(request: SignedInRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(BenchmarkJob, pk=pk)
    if not is_job_insider(request.user, job):
        raise Http404
    services.cancel_job(job=job)
    messages.success(
        request,
        "Cancelled."
        if job.status == "cancelled"
        else "Cancelling: the job stops after its current task.",
    )
    return redirect("lab:job", pk=pk)


@never_cache
@login_required
@permission_required(OPERATE, raise_exception=True)
def hosts(request: SignedInRequest) -> HttpResponse:
    """The hosts, and for admins their keys: a new key is shown in this answer only."""
    rows = WorkerHost.objects.select_related("hardware", "current_job")
    admin = can_administer_hosts(request.user)
    context: dict = {"hosts": rows, "can_approve": admin}
    if admin:
        form = HostKeyForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                key, context["new_key"] = agents.create_host_key(
                    host_name=form.cleaned_data["host_name"],
                    user=request.user,
                    scopes=form.cleaned_data["scopes"],
                )
                context["new_key_host"] = key.host_name
                form = HostKeyForm()
            except ValueError as exc:
                form.add_error("host_name", str(exc))
        context |= {"key_form": form, "keys": HostKey.objects.order_by("revoked_at", "host_name")}
    elif request.method == "POST":
        raise Http404
    return render(request, "worker/hosts.html", context)


@require_POST
@login_required
def revoke_host_key(request: SignedInRequest, pk: int) -> HttpResponse:
    if not can_administer_hosts(request.user):
        raise Http404
    key = agents.revoke_host_key(key=get_object_or_404(HostKey, pk=pk))
    messages.success(request, f"Key {key} is revoked: its host stops at its next call.")
    return redirect("lab:hosts")


@require_POST
@login_required
def approve_host(request: SignedInRequest, pk: int) -> HttpResponse:
    if not can_administer_hosts(request.user):
        raise Http404
    host = get_object_or_404(WorkerHost, pk=pk)
    services.approve_host(
        host=host, user=request.user, approved=request.POST.get("approved") == "1"
    )
    return redirect("lab:hosts")


@login_required
@permission_required(OPERATE, raise_exception=True)
def host_detail(request: SignedInRequest, pk: int) -> HttpResponse:
    host = get_object_or_404(WorkerHost, pk=pk)
    servers = [
        (f"{s['url']}|{m}", f"{s.get('kind')} · {m}")
        for s in host.inventory
        for m in s.get("models", [])
    ]
    form = QuickPromptForm(request.POST or None, servers=servers)
    if request.method == "POST" and form.is_valid():
        if not host.is_approved:
            form.add_error(None, "This host is not approved yet.")
        else:
            url, model = form.cleaned_data["server"].split("|", 1)
            quick = services.request_quick_prompt(
                host=host,
                user=request.user,
                server_url=url,
                model=model,
                prompt=form.cleaned_data["prompt"],
            )
            return redirect("lab:prompt", pk=quick.pk)
    prompts = host.prompts.filter(requested_by=request.user).order_by("-created_at")[:10]
    return render(request, "worker/host.html", {"host": host, "form": form, "prompts": prompts})


@login_required
@permission_required(OPERATE, raise_exception=True)
def prompt_detail(request: SignedInRequest, pk: int) -> HttpResponse:
    quick = get_object_or_404(
        QuickPrompt.objects.select_related("host__current_job"), pk=pk, requested_by=request.user
    )
    done = quick.status in (QuickPrompt.Status.DONE, QuickPrompt.Status.FAILED)
    # A waiting prompt says why: the host runs a job (until about its ETA) or is offline.
    busy_with = quick.host.current_job if quick.status == QuickPrompt.Status.QUEUED else None
    context = {
        "quick": quick,
        "busy_with": busy_with if busy_with and not busy_with.is_final else None,
    }
    if getattr(request, "htmx", False):
        response = render(request, "worker/prompt.html#reply", context)
        return HttpResponseStopPolling(response.content) if done else response
    return render(request, "worker/prompt.html", context)


@login_required
def notification_settings(request: SignedInRequest) -> HttpResponse:
    prefs, _ = NotificationSettings.objects.get_or_create(user=request.user)
    form = NotificationForm(request.POST or None, instance=prefs)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Saved.")
        return redirect("lab:notifications")
    return render(request, "worker/notifications.html", {"form": form, "prefs": prefs})


class FinishedJobsFeed(Feed):
    """Atom feed of finished lab jobs."""

    feed_type = XmlSafeAtomFeed
    title = "BenchLoop lab: finished jobs"
    link = "/lab/"
    subtitle = "Lab benchmark jobs as they finish."

    def items(self):
        return BenchmarkJob.objects.finished().order_by("-finished_at")[:50]

    def item_title(self, job: BenchmarkJob) -> str:
        return f"Job {job.pk} {job.status}: {redact_text(job.model)}"

    def item_description(self, job: BenchmarkJob) -> str:
        # Atom puts this in <summary type="html">: readers render it as HTML, so escape it.
        text = f"{job.model} on pool {job.pool}, profile {job.profile or ', '.join(job.suites)}."
        return escape(redact_text(text + (f" Reason: {job.error}" if job.error else "")))

    def item_link(self, job: BenchmarkJob) -> str:
        return f"/lab/jobs/{job.pk}/"

    def item_updateddate(self, job: BenchmarkJob):
        return job.finished_at


def _job_feed_validators(request: HttpRequest) -> tuple[str, datetime] | None:
    """The feed shows the newest finished jobs: it changes when one more finishes or one goes."""
    summary = BenchmarkJob.objects.finished().aggregate(
        count=Count("id"), newest=Max("finished_at"), last=Max("id")
    )
    if summary["newest"] is None:
        return None
    where = f"{request.scheme}://{request.get_host()}"  # the feed's links name it
    parts = f"{summary['count']}|{summary['last']}|{summary['newest'].isoformat()}|{where}"
    etag = hashlib.sha256(parts.encode()).hexdigest()[:32]
    return etag, summary["newest"]


# Feed readers poll with HEAD and conditional GETs; a Feed answers any method otherwise.
finished_jobs_feed = require_safe(revalidated(_job_feed_validators)(FinishedJobsFeed()))
