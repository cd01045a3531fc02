"""Account pages, API keys, device login approval, run reports and the moderation queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required, permission_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.contrib.auth.views import LoginView, PasswordResetView
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.urls import reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django.views.decorators.vary import vary_on_headers

from core.formlimits import limit_posts, seconds_to_wait, too_many_requests
from core.http import SignedInHtmxRequest, SignedInRequest
from runs.models import Hardware, Run
from submissions import accelerators, accounts, services, signin
from submissions import queue as moderation_queue
from submissions.access import MODERATE_PERMISSION
from submissions.forms import (
    AcceleratorForm,
    ApiKeyForm,
    DecisionForm,
    DeviceCodeForm,
    ReportForm,
    SignupForm,
)
from submissions.models import (
    ApiKey,
    Channel,
    ModerationDecision,
    Status,
    Submission,
    SubmitterProfile,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


@sensitive_post_parameters("password1", "password2")
@never_cache
@limit_posts("signup")
def signup(request: HttpRequest) -> HttpResponse:
    """The answer is the same whether the email is new or registered (see accounts.py)."""
    if request.user.is_authenticated:
        return redirect("accounts:profile")
    form = SignupForm(request.POST or None)
    if request.method == "POST":
        accounts.forget_stale_signups()
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        wait = seconds_to_wait(request, "mail_to_address", about=email)
        if wait:
            return too_many_requests(request, wait)
        pending = accounts.request_signup(
            username=form.cleaned_data["username"],
            email=email,
            password=form.cleaned_data["password1"],
        )
        if pending is not None and accounts.mail_goes_to_console():
            # Nobody receives console mail: this browser gets the link the terminal shows.
            request.session[ACTIVATION_LINK] = accounts.activation_path(pending)
        return redirect("accounts:signup_sent")
    return render(request, "accounts/signup.html", {"form": form})


ACTIVATION_LINK = "signup_activation_path"


@never_cache
def signup_sent(request: HttpRequest) -> HttpResponse:
    console = accounts.mail_goes_to_console()
    link = request.session.get(ACTIVATION_LINK, "") if console else ""
    return render(
        request, "accounts/signup_sent.html", {"console_mail": console, "activation_link": link}
    )


@never_cache
@limit_posts("activate")
def activate(request: HttpRequest, uidb64: str, token: str) -> HttpResponse:
    """GET shows a button, POST activates: mail scanners that open links activate nothing."""
    user = accounts.pending_user(uidb64, token)
    if user is None:
        return render(request, "accounts/activate.html", {"invalid": True}, status=400)
    if request.method == "POST":
        accounts.activate(user=user)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, "Welcome to BenchLoop. Create an API key to upload runs.")
        return redirect("accounts:profile")
    return render(request, "accounts/activate.html", {"pending": user})


class _PasswordResetView(PasswordResetView):
    """Django's reset view (it answers the same for unknown addresses), with mail to any one
    address rate-limited so the form cannot bomb an inbox."""

    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"
    success_url = reverse_lazy("accounts:password_reset_done")
    # Links in mail are built on SITE_URL, never on the request's Host header.
    extra_email_context = {"site_url": settings.SITE_URL}

    def form_valid(self, form):
        wait = seconds_to_wait(self.request, "mail_to_address", about=form.cleaned_data["email"])
        if wait:
            return too_many_requests(self.request, wait)
        return super().form_valid(form)


password_reset = limit_posts("password_reset")(_PasswordResetView.as_view())


_login_view = LoginView.as_view(
    template_name="accounts/login.html", redirect_authenticated_user=True
)


@sensitive_post_parameters()
@never_cache
def sign_in(request: HttpRequest) -> HttpResponseBase:
    """Django's LoginView behind a brute-force limit: 429 once a username or address has had
    too many failed attempts (see submissions/signin.py)."""
    if request.method != "POST" or request.user.is_authenticated:
        return _login_view(request)
    username = request.POST.get("username", "")
    wait = signin.seconds_locked(request, username)
    if wait:
        minutes = -(-wait // 60)
        message = (
            "Too many failed sign-in attempts for this account or from your network. "
            f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
        )
        context = {
            "form": AuthenticationForm(request),
            "locked_out": message,
            "next": request.POST.get("next", ""),
        }
        refused = render(request, "accounts/login.html", context, status=429)
        refused["Retry-After"] = str(wait)
        return refused
    response = _login_view(request)
    if request.user.is_authenticated:
        signin.record_success(request, username)
    else:
        signin.record_failure(request, username)
    return response


@require_safe
@login_required
def profile(request: SignedInRequest) -> HttpResponse:
    counts = Submission.objects.filter(submitter=request.user).aggregate(
        total=Count("id"),
        approved=Count("id", filter=Q(status=Status.APPROVED)),
        waiting=Count("id", filter=Q(status__in=[Status.PENDING, Status.FLAGGED])),
    )
    trusted = SubmitterProfile.objects.filter(user=request.user, is_trusted=True).exists()
    return render(
        request,
        "accounts/profile.html",
        {
            "counts": counts,
            "trusted": trusted,
            "active_keys": ApiKey.objects.active().filter(user=request.user).count(),
        },
    )


@require_safe
@login_required
def my_runs(request: SignedInRequest) -> HttpResponse:
    submissions = (
        Submission.objects.filter(submitter=request.user)
        .select_related("run__stack", "run__hardware")
        .order_by("-created_at")
    )
    page = Paginator(submissions, 50).get_page(request.GET.get("page"))
    # Rows must be told apart (issue 18): each says when it ran, its profile, how complete it
    # is (the queue's own rule) and its status.
    rows = [(s, moderation_queue.completeness(s.run)) for s in page.object_list]
    return render(request, "accounts/runs.html", {"page": page, "rows": rows})


def _get_own_submission(request: SignedInRequest, run_id: int) -> Submission:
    """The signed-in user's submission for this run, or 404 (never 403: don't confirm it exists)."""
    return get_object_or_404(
        Submission.objects.select_related("run"), run_id=run_id, submitter=request.user
    )


@login_required
@require_POST
def withdraw(request: SignedInRequest, run_id: int) -> HttpResponse:
    submission = _get_own_submission(request, run_id)
    services.withdraw_run(submission=submission, user=request.user)
    messages.success(request, "The run is withdrawn and no longer public.")
    return redirect("accounts:runs")


@login_required
@require_POST
def delete(request: SignedInRequest, run_id: int) -> HttpResponse:
    submission = _get_own_submission(request, run_id)
    services.delete_run(submission=submission)
    messages.success(request, "The run and its results are deleted.")
    return redirect("accounts:runs")


@never_cache
@login_required
@limit_posts("api_key")
def api_keys(request: SignedInRequest) -> HttpResponse:
    form = ApiKeyForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        _key, new_key = services.create_api_key(
            user=request.user, name=form.cleaned_data["name"], scopes=form.cleaned_data["scopes"]
        )
        form = ApiKeyForm()
    keys = ApiKey.objects.filter(user=request.user).order_by("revoked_at", "-created_at")
    response = render(
        request, "accounts/keys.html", {"form": form, "keys": keys, "new_key": new_key}
    )
    return response


@login_required
@require_POST
def revoke_key(request: SignedInRequest, pk: int) -> HttpResponse:
    api_key = get_object_or_404(ApiKey, pk=pk, user=request.user)
    api_key.revoke()
    messages.success(request, f"Key “{api_key.name}” is revoked; it stops working at once.")
    return redirect("accounts:keys")


@never_cache
@login_required
@limit_posts("device_approve")
def device(request: SignedInRequest) -> HttpResponse:
    """Approve or deny a `benchloop login` by the code its terminal shows."""
    form = DeviceCodeForm(request.POST or None, initial={"code": request.GET.get("code", "")})
    decided = None
    if request.method == "POST" and form.is_valid():
        decided = services.decide_device_authorization(
            user_code=form.cleaned_data["code"],
            user=request.user,
            approve=request.POST.get("decision") != "deny",
        )
        if decided is None:
            form.add_error("code", "No pending login has this code, or it has expired.")
    return render(request, "accounts/device.html", {"form": form, "decided": decided})


@login_required
@limit_posts("report")
def report(request: SignedInRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.published().select_related("stack"), pk=run_id)
    form = ReportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        services.report_run(run=run, reporter=request.user, reason=form.cleaned_data["reason"])
        messages.success(request, "Thanks: your report is in the moderators' queue.")
        return redirect("leaderboard:leaderboard")
    context = {
        "form": form,
        "run": run,
        "hides_at_once": services.has_standing(request.user),
        "reports_to_hide": settings.BENCHLOOP_REPORTS_TO_HIDE_RUN,
    }
    return render(request, "submissions/report.html", context)


def _safe_next(request: HttpRequest, default: str) -> str:
    """A local `next` URL, or the default: never an open redirect."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return resolve_url(default)


QUEUE_STATUSES = [
    Status.FLAGGED,
    Status.PENDING,
    Status.APPROVED,
    Status.REJECTED,
    Status.WITHDRAWN,
]


# The full page and its #queue fragment share a URL (a decision made with htmx lands on it):
# neither may be stored, or Back could show the fragment alone.
@never_cache
@vary_on_headers("HX-Request")
@require_safe
@login_required
@permission_required(MODERATE_PERMISSION, raise_exception=True)
def queue(request: SignedInHtmxRequest) -> HttpResponse:
    """Waiting runs with the evidence a decision needs; `?select=all` ticks every box, so a
    whole page can be decided without JavaScript. An htmx request gets the #queue partial."""
    status = request.GET.get("status", "waiting")
    channel = request.GET.get("channel", "")
    submissions = (
        Submission.objects.select_related(
            "run__stack", "run__hardware", "submitter__submitter_profile"
        )
        .defer("run__raw_payload")
        .order_by("created_at", "pk")
    )
    if status == "waiting":
        submissions = submissions.needing_a_moderator()
    elif status == "reported":
        submissions = submissions.reported()
    elif status in QUEUE_STATUSES:
        submissions = submissions.filter(status=status)
    if channel in Channel.values:
        submissions = submissions.filter(channel=channel)
    page = Paginator(submissions, 25).get_page(request.GET.get("page"))
    rows = moderation_queue.items(
        list(page.object_list),
        viewer=request.user,
        select_all=request.GET.get("select") == "all",
    )
    # Where a decision returns to: this view, its selection cleared.
    query = request.GET.copy()
    query.pop("select", None)
    template = "submissions/queue.html"
    if request.htmx:
        template += "#queue"
    return render(
        request,
        template,
        {
            "page": page,
            "rows": rows,
            "any_actionable": any(not item.is_own for item in rows),
            "return_path": f"{request.path}?{query.urlencode()}" if query else request.path,
            "status": status,
            "channel": channel,
            "statuses": QUEUE_STATUSES,
            "channels": Channel.choices,
        },
    )


@require_POST
@login_required
@permission_required(MODERATE_PERMISSION, raise_exception=True)
def decide(request: SignedInRequest) -> HttpResponse:
    """One decision for every ticked run (the form posts checkboxes named "submissions")."""
    back = _safe_next(request, "submissions:queue")
    form = DecisionForm(request.POST, queryset=Submission.objects.all())
    if not form.is_valid():
        if "submissions" in form.errors:
            messages.error(request, "Tick at least one run: nothing was decided.")
        if "reason" in form.errors:
            why = " ".join(str(message) for message in form.errors["reason"])
            messages.error(request, f"Nothing was decided. {why}")
        if "status" in form.errors:
            messages.error(request, "Choose approve, reject or flag: nothing was decided.")
        return redirect(back)
    chosen = form.cleaned_data["submissions"]
    status = form.cleaned_data["status"]
    own = [s for s in chosen if s.submitter_id == request.user.pk]
    decided = 0
    for submission in chosen:
        if submission in own:
            continue
        services.moderate_submission(
            submission=submission,
            status=status,
            moderator=request.user,
            reason=form.cleaned_data["reason"],
        )
        decided += 1
    if own:
        messages.error(
            request,
            f"{len(own)} of them are your own runs: another moderator has to decide on those.",
        )
    if decided:
        # The wording leaderboard/tests/test_journey.py waits for.
        messages.success(request, f"{decided} submission(s) now {status}.")
    return redirect(back)


@require_safe
@login_required
@permission_required(MODERATE_PERMISSION, raise_exception=True)
def audit_log(request: SignedInRequest) -> HttpResponse:
    decisions = ModerationDecision.objects.select_related(
        "submission__run__stack", "moderator"
    ).order_by("-created_at")
    page = Paginator(decisions, 50).get_page(request.GET.get("page"))
    return render(request, "submissions/log.html", {"page": page})


@require_safe
@login_required
@permission_required(MODERATE_PERMISSION, raise_exception=True)
def submitters(request: SignedInRequest) -> HttpResponse:
    """Accounts that have uploaded, with their record and trust, to trust or untrust."""
    accounts = User.objects.filter(submissions__isnull=False).distinct()
    search = request.GET.get("q", "").strip()[:150]
    if search:
        accounts = accounts.filter(username__icontains=search)
    if request.GET.get("trusted") in ("0", "1"):
        trusted = request.GET["trusted"] == "1"
        accounts = (
            accounts.filter(submitter_profile__is_trusted=True)
            if trusted
            else accounts.exclude(submitter_profile__is_trusted=True)
        )
    ids = Paginator(accounts.order_by("username").values_list("pk", flat=True), 50)
    page = ids.get_page(request.GET.get("page"))
    people = (
        User.objects.filter(pk__in=list(page.object_list))
        .select_related("submitter_profile")
        .annotate(**_status_counts("submissions__status"))
        .order_by("username")
    )
    return render(
        request,
        "submissions/submitters.html",
        {
            "page": page,
            "people": people,
            "q": search,
            "trusted": request.GET.get("trusted", ""),
            "return_path": request.get_full_path(),
        },
    )


class _StatusCounts(TypedDict):
    """What _status_counts annotates an account with: its uploads, and per HISTORY_STATUSES."""

    uploads: int
    approved: int
    pending: int
    flagged: int
    rejected: int
    withdrawn: int


def _status_counts(lookup: str) -> dict[str, Count]:
    counts = {
        status: Count("submissions", filter=Q(**{lookup: status}), distinct=True)
        for status in moderation_queue.HISTORY_STATUSES
    }
    return {"uploads": Count("submissions", distinct=True), **counts}


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
@login_required
@permission_required(MODERATE_PERMISSION, raise_exception=True)
def trust(request: SignedInRequest, user_id: int) -> HttpResponse:
    """GET: the submitter's record and a button to trust (or stop trusting) them; POST does it.
    A trusted submitter's clean uploads are approved at once; flagged ones still wait."""
    user = cast(
        "WithAnnotations[User, _StatusCounts]",
        get_object_or_404(
            User.objects.select_related("submitter_profile").annotate(
                **_status_counts("submissions__status")
            ),
            pk=user_id,
        ),
    )
    if user == request.user:
        raise Http404  # moderators do not vouch for themselves
    if request.method == "POST":
        trusted = request.POST.get("trusted") == "1"
        services.set_trusted(user=user, trusted=trusted, moderator=request.user)
        waiting = user.pending + user.flagged
        if trusted:
            text = (
                f"{user.get_username()} is now trusted: their next clean uploads are approved "
                "without waiting (flagged ones still wait for a moderator)."
            )
            if waiting:
                text += (
                    f" Their {waiting} waiting run{'s' if waiting != 1 else ''} still "
                    f"need{'s' if waiting == 1 else ''} a decision."
                )
        else:
            text = (
                f"{user.get_username()} is no longer trusted: their uploads wait for a "
                "moderator again."
            )
        messages.success(request, text)
        return redirect(_safe_next(request, "submissions:queue"))
    profile = getattr(user, "submitter_profile", None)
    recent = (
        Submission.objects.filter(submitter=user)
        .select_related("run__stack", "run__hardware")
        .defer("run__raw_payload")
        .order_by("-created_at")[:10]
    )
    back = request.GET.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = ""
    return render(
        request,
        "submissions/trust.html",
        {
            "person": user,
            "profile": profile,
            "trusted": bool(profile and profile.is_trusted),
            "recent": recent,
            "next": back,
        },
    )


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
@login_required
@permission_required(MODERATE_PERMISSION, raise_exception=True)
def add_hardware(request: SignedInRequest) -> HttpResponse:
    """Add a machine the accelerator data lacks, prefilled from a queued run's hardware; the
    runs waiting on it get their ceiling at once (submissions.accelerators)."""
    hardware = None
    if request.GET.get("hardware", "").isdigit():
        hardware = Hardware.objects.filter(pk=int(request.GET["hardware"])).first()
    initial = {}
    if hardware is not None:
        name, kind = accelerators.hardware_name(hardware)
        memory = hardware.vram_gb if kind == "gpu" else hardware.ram_gb if kind == "apple" else None
        initial = {"name": name, "kind": kind, "memory_gb": memory}
    form = AcceleratorForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            row, rechecked = accelerators.add_accelerator(
                moderator=request.user, entry=form.cleaned_data
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(
                request,
                f"{row.name} added ({row.bandwidth_gbps:g} GB/s); "
                f"{rechecked} waiting run{'s' if rechecked != 1 else ''} rechecked.",
            )
            return redirect("submissions:queue")
    return render(request, "submissions/add_hardware.html", {"form": form, "hardware": hardware})
