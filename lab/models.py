"""The lab queue: benchmark jobs, their event stream, the GPU hosts that run them."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from runs.matrix import MATRIX_SUITES, is_program
from submissions.models import SecretKey
from worker.rules.harnesses import HARNESSES, program_variants
from worker.rules.profiles import profile_names
from worker.rules.reasoning import MAX_TOKENS_CEILING

# What a job may ask for; the form, the API and full_clean all read these (one rule).
PROVIDERS = [("auto", "auto-detect"), ("openai", "OpenAI-compatible"), ("ollama", "Ollama")]
# The engine's profiles (speed-deep, matrix, …), read from its data file: no copy to keep in step.
PROFILES = [(name, name) for name in profile_names()]


def known_profile(value: str) -> None:
    # A validator, not choices, for the same reason as the harness's.
    if value and value not in dict(PROFILES):
        raise ValidationError(f"Unknown profile; one of: {', '.join(dict(PROFILES))}.")


def known_harness(value: str) -> None:
    # A validator, not choices: the engine's list grows without a migration each time.
    if value not in HARNESSES:
        raise ValidationError(f"Unknown harness; one of: {', '.join(HARNESSES)}.")


def harness_problem(
    harness: str, suites: object, profile: str = "", variant: str = ""
) -> tuple[str, str] | None:
    """(the field to fix, why) when a job cannot run this harness, in the engine's own terms
    (worker.engine.preflight): a real agent program (Aider, Hermes Agent, mini-swe-agent) only
    attempts the matrix suites, which are written for a harness that edits files, and only a
    program has variants (Aider's edit formats)."""
    if not is_program(harness):
        if variant:
            return "harness_variant", "A variant applies to an agent program only."
        return None
    chosen = [s for s in suites if isinstance(s, str)] if isinstance(suites, list) else []
    on_matrix = all(s in MATRIX_SUITES for s in chosen) if chosen else profile == "matrix"
    if not on_matrix:
        return "harness", (
            f"The harness {harness} is a real agent program: it runs only the matrix suites "
            f"({', '.join(MATRIX_SUITES)}). Choose the matrix profile, or name those suites."
        )
    known = program_variants(harness)
    if variant and variant not in known:
        names = ", ".join(known) or "none"
        return "harness_variant", f"{harness} has no variant {variant!r}; its variants: {names}."
    return None


# A lab run measured on another machine than its host was approved as (lab.inventory) is
# stored self-reported with this reason, which its job page and finish mail give.
HARDWARE_MISMATCH = "Hardware differs from the lab host's approved machine"

pool_name = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]{0,63}$", "Lower-case letters, digits, dots, dashes (e.g. gpu.4090)."
)


class HostQuerySet(models.QuerySet):
    def approved(self) -> HostQuerySet:
        return self.exclude(approved_at=None)


class WorkerHost(models.Model):
    """A machine running a lab worker; it gets jobs only once an admin approves it."""

    name = models.CharField(max_length=100, unique=True)
    hardware = models.ForeignKey(
        "runs.Hardware", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    hardware_info = models.JSONField(default=dict, blank=True)
    pools = models.JSONField(default=list, blank=True)
    # Inference servers found on the host and their models: [{kind, url, models: [...]}].
    # URLs are lab-internal and shown to lab operators only.
    inventory = models.JSONField(default=list, blank=True)
    registered_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    current_job = models.ForeignKey(
        "BenchmarkJob", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    objects = HostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        permissions = [("operate_lab", "Can queue lab jobs and manage lab hosts")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_approved(self) -> bool:
        return self.approved_at is not None

    @property
    def queue_name(self) -> str:
        """The host's own queue, for work that must run on this machine (quick prompts, and
        jobs for a server the host reported)."""
        return f"host.{self.name}"

    def serves(self, pool: str) -> bool:
        """Whether this host takes jobs sent to `pool` (one of its pools, or its own queue)."""
        return pool == self.queue_name or pool in (self.pools or [])

    @property
    def is_online(self) -> bool:
        """Heard from within the reaper's limit; past it the host is presumed dead, as its
        jobs are (BENCHLOOP_JOB_STALE_SECONDS)."""
        if self.last_heartbeat_at is None:
            return False
        limit = timedelta(seconds=settings.BENCHLOOP_JOB_STALE_SECONDS)
        return timezone.now() - self.last_heartbeat_at <= limit


class JobQuerySet(models.QuerySet):
    def active(self) -> JobQuerySet:
        return self.filter(status__in=BenchmarkJob.ACTIVE)

    def finished(self) -> JobQuerySet:
        return self.filter(status__in=BenchmarkJob.FINAL)

    def undispatched(self, before) -> JobQuerySet:
        """Queued jobs whose message never reached the broker (it was down at the time)."""
        return self.filter(
            status=BenchmarkJob.Status.QUEUED, dispatched_at__isnull=True, created_at__lt=before
        )

    def stale(self, before) -> JobQuerySet:
        """Claimed or running jobs whose worker stopped sending heartbeats."""
        return self.filter(
            status__in=[BenchmarkJob.Status.CLAIMED, BenchmarkJob.Status.RUNNING],
            heartbeat_at__lt=before,
        )


class BenchmarkJob(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        CLAIMED = "claimed"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Target(models.TextChoices):
        ENDPOINT = "endpoint", "an endpoint the worker can reach"
        MANAGED = "managed", "a llama.cpp server the worker starts"

    ACTIVE = (Status.QUEUED, Status.CLAIMED, Status.RUNNING)
    FINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="benchmark_jobs"
    )
    target = models.CharField(max_length=10, choices=Target.choices, default=Target.ENDPOINT)
    model = models.CharField(max_length=300, help_text="model id the server serves")
    # Endpoint jobs. The key is named, never stored: the worker reads it from its environment.
    endpoint_url = models.CharField(max_length=500, blank=True)
    provider = models.CharField(max_length=20, choices=PROVIDERS, default="auto")
    api_key_ref = models.CharField(
        max_length=100,
        blank=True,
        validators=[
            RegexValidator(r"^[A-Z][A-Z0-9_]*$", "An environment variable name on the worker.")
        ],
    )
    # Managed llama.cpp recipe.
    binary = models.CharField(max_length=300, blank=True, default="llama-server")
    model_path = models.CharField(max_length=500, blank=True)
    launch_flags = models.JSONField(default=list, blank=True)
    context_length = models.PositiveIntegerField(null=True, blank=True)
    threads = models.PositiveSmallIntegerField(null=True, blank=True)
    # What to run.
    profile = models.CharField(
        max_length=20, validators=[known_profile], blank=True, default="smoke"
    )
    suites = models.JSONField(default=list, blank=True)
    tasks = models.JSONField(
        default=list, blank=True, help_text="task id patterns, e.g. speed-p128-* (quick checks)"
    )
    trials = models.PositiveSmallIntegerField(default=3)
    harness = models.CharField(max_length=20, validators=[known_harness], default="raw")
    harness_variant = models.CharField(
        max_length=40, blank=True, help_text="an agent program's variant, e.g. Aider's edit format"
    )
    # `benchloop run --max-tokens`: the engine refuses 0 and more than its ceiling, so the form
    # and full_clean do too, rather than a worker failing the job later. (No database check:
    # the form once let such values through, and those jobs' rows stay as they were.)
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(1, "At least 1 token."),
            MaxValueValidator(MAX_TOKENS_CEILING, "At most %(limit_value)s tokens."),
        ],
        help_text="every quality task's answer limit; empty: each task's own",
    )
    # `benchloop run --thinking-budget`: None is the engine's automatic budget.
    thinking_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(MAX_TOKENS_CEILING, "At most %(limit_value)s tokens.")],
        help_text="tokens each quality task may think; empty: automatic",
    )
    pool = models.CharField(max_length=64, validators=[pool_name], default="cpu")
    priority = models.PositiveSmallIntegerField(default=5, help_text="0 (low) to 9 (high)")

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the broker accepted the job's message; empty while it still has to be (re)sent.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    host = models.ForeignKey(
        WorkerHost, on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs"
    )
    error = models.TextField(blank=True)
    run = models.ForeignKey(
        "runs.Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Progress, denormalised from the events for the job page.
    total_tasks = models.PositiveIntegerField(default=0)
    completed_tasks = models.PositiveIntegerField(default=0)
    current_suite = models.CharField(max_length=40, blank=True)
    current_task = models.CharField(max_length=120, blank=True)
    last_decode_tps = models.FloatField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The reaper scans only live jobs by heartbeat age.
            models.Index(
                fields=["heartbeat_at"],
                condition=Q(status__in=["claimed", "running"]),
                name="job_live_heartbeat_idx",
            ),
            models.Index(fields=["status", "-created_at"], name="job_status_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(priority__lte=9), name="job_priority_0_9"),
            models.CheckConstraint(
                condition=Q(thinking_budget__lte=MAX_TOKENS_CEILING),
                name="job_thinking_budget_ceiling",
            ),
            models.CheckConstraint(
                condition=Q(target="endpoint", endpoint_url__gt="")
                | Q(target="managed", model_path__gt=""),
                name="job_target_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk}: {self.model} ({self.status})"

    def clean(self) -> None:
        """What the fields cannot say, as errors on the fields to fix (the form and the API
        both come through here): the target's own field, and one-line names."""
        from runs import bounds

        errors: dict[str, str] = {}
        if self.target == self.Target.ENDPOINT and not self.endpoint_url:
            errors["endpoint_url"] = "An endpoint job needs a URL the worker can reach."
        if self.target == self.Target.MANAGED and not self.model_path:
            errors["model_path"] = "A managed job needs the model file's path on the host."
        for name in ("model", "endpoint_url", "binary", "model_path"):
            problem = bounds.text_problem(getattr(self, name) or "")
            if problem:
                errors.setdefault(name, f"The {name.replace('_', ' ')} {problem}.")
        harness_error = harness_problem(
            self.harness, self.suites, self.profile, self.harness_variant
        )
        if harness_error:
            errors.setdefault(*harness_error)
        if errors:
            raise ValidationError(errors)

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def selection(self) -> str:
        """What the job runs, in words: its suites where it names them (the agent then ignores
        the profile: worker.agent.jobs), else its profile."""
        if self.suites:
            return "suites " + ", ".join(str(s) for s in self.suites)
        return f"profile {self.profile or 'custom'}"

    def shows_raw_text_to(self, user) -> bool:
        """Whether `user` sees this job's endpoint error text unredacted (lab.access); everyone
        else sees it through worker.rules.redact."""
        from lab.access import is_job_insider

        return is_job_insider(user, self)

    @property
    def eta_at(self):
        """When the job should finish, from its pace so far (elapsed time per completed task);
        None until a task is done, and once it is final."""
        if self.is_final or not self.started_at or not self.total_tasks:
            return None
        if not 0 < self.completed_tasks < self.total_tasks:
            return None
        now = timezone.now()
        per_task = (now - self.started_at) / self.completed_tasks
        return now + per_task * (self.total_tasks - self.completed_tasks)

    @property
    def run_evidence(self) -> str:
        """What the job's run may be called: "verified" only when it is, else why it is not
        (a lab run measured under load is stored self-reported: runs.services.new_run)."""
        run = self.run
        if run is None:
            return ""
        if run.is_verified:
            return "verified"
        if run.contention_status == "contended":
            return "measured under load: self-reported"
        submission = getattr(run, "submission", None)
        if submission and any(r.startswith(HARDWARE_MISMATCH) for r in submission.flag_reasons):
            return "measured on other hardware than the host's approved machine: self-reported"
        return "self-reported"

    @property
    def progress_percent(self) -> int:
        if not self.total_tasks:
            return 0
        return min(100, round(100 * self.completed_tasks / self.total_tasks))


class JobEvent(models.Model):
    """One progress event from the engine, kept so the job page can replay the run."""

    job = models.ForeignKey(BenchmarkJob, on_delete=models.CASCADE, related_name="events")
    attempt = models.PositiveSmallIntegerField()
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=30)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["attempt", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["job", "attempt", "seq"], name="jobevent_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.seq}"


class QuickPrompt(models.Model):
    """One prompt sent to a model on a host, to check it before queueing a long job."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        STREAMING = "streaming"
        DONE = "done"
        FAILED = "failed"

    host = models.ForeignKey(WorkerHost, on_delete=models.CASCADE, related_name="prompts")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    server_url = models.CharField(max_length=500)
    model = models.CharField(max_length=300)
    prompt = models.TextField(max_length=4000)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    reply = models.TextField(blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    decode_tps = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The job the host was running when the prompt was answered: they shared the server, so
    # the job's speed figures from that moment may be slower (its page says so).
    during_job = models.ForeignKey(
        BenchmarkJob,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="shared_with_prompts",
    )

    def __str__(self) -> str:
        return f"prompt {self.pk} to {self.model}"


def _new_secret() -> str:
    return secrets.token_urlsafe(32)


class NotificationSettings(models.Model):
    """Where a lab operator hears about finished jobs: email always, a signed webhook if set."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_settings"
    )
    email_on_finish = models.BooleanField(default=True)
    webhook_url = models.URLField(blank=True)
    webhook_secret = models.CharField(max_length=64, default=_new_secret)

    def __str__(self) -> str:
        return f"notifications for {self.user}"


class WebhookDelivery(models.Model):
    job = models.ForeignKey(BenchmarkJob, on_delete=models.CASCADE, related_name="deliveries")
    url = models.URLField()
    payload = models.JSONField()
    attempts = models.PositiveSmallIntegerField(default=0)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "url"], name="webhook_once_per_job_url"),
        ]

    def __str__(self) -> str:
        return f"webhook for job {self.job_id}"


class HostKeyQuerySet(models.QuerySet):
    def active(self) -> HostKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class HostKey(SecretKey):
    """A `blh_…` key a lab host's agent speaks to the site with, instead of database
    credentials; it names the one host it may speak for, and its scopes say what that host
    may do."""

    # agent: register, heartbeats, claim jobs of its pools, stream events, answer prompts.
    # verify: the runs it uploads are verified lab runs (auto-approved).
    SCOPES = ("agent", "verify")

    host_name = models.CharField(max_length=100)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    objects = HostKeyQuerySet.as_manager()

    class Meta:
        ordering = ["host_name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.host_name} (blh_{self.prefix}…)"
