from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib import admin
from django.db import models

from lab import agents, services
from lab.models import (
    BenchmarkJob,
    HostKey,
    JobEvent,
    NotificationSettings,
    QuickPrompt,
    WebhookDelivery,
    WorkerHost,
)


@admin.register(WorkerHost)
class WorkerHostAdmin(admin.ModelAdmin):
    list_display = ["name", "hardware", "pools", "approved_at", "last_heartbeat_at", "current_job"]
    list_filter = ["approved_at"]
    search_fields = ["name"]
    raw_id_fields = ["hardware", "current_job", "approved_by"]
    actions = ["approve"]

    @admin.action(description="Approve selected hosts")
    def approve(self, request, queryset) -> None:
        for host in queryset:
            services.approve_host(host=host, user=request.user)


@admin.register(HostKey)
class HostKeyAdmin(admin.ModelAdmin):
    """Keys are created on the lab's hosts page (shown once there); here only revoked."""

    list_display = ["host_name", "prefix", "scopes", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = [f.name for f in HostKey._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset) -> None:
        for key in queryset:
            agents.revoke_host_key(key=key)


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    readonly_fields = ["attempt", "seq", "kind", "payload", "created_at"]


@admin.register(BenchmarkJob)
class BenchmarkJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "model",
        "pool",
        "status",
        "attempts",
        "host",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "pool", "target", "profile"]
    search_fields = ["model", "endpoint_url", "requested_by__username"]
    raw_id_fields = ["requested_by", "host", "run"]
    inlines = [JobEventInline]


@admin.register(QuickPrompt)
class QuickPromptAdmin(admin.ModelAdmin):
    list_display = ["id", "host", "model", "status", "ttft_ms", "decode_tps", "created_at"]
    list_filter = ["status"]
    search_fields = ["model", "prompt"]


# A scheme-less webhook address means https (and Django 5.2 warns, then 500s under -W error,
# on every URL form field that leaves the default scheme unsaid).
HTTPS_URLS: Mapping[type[models.Field[Any, Any]], Mapping[str, Any]] = {
    models.URLField: {"assume_scheme": "https"}
}


@admin.register(NotificationSettings)
class NotificationSettingsAdmin(admin.ModelAdmin):
    formfield_overrides = HTTPS_URLS
    list_display = ["user", "email_on_finish", "webhook_url"]
    search_fields = ["user__username", "webhook_url"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    formfield_overrides = HTTPS_URLS
    list_display = ["job", "url", "attempts", "last_status", "delivered_at"]
    list_filter = ["last_status"]
    search_fields = ["url"]


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ["job", "attempt", "seq", "kind", "created_at"]
    list_filter = ["kind"]
    search_fields = ["job__model"]
