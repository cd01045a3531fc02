from __future__ import annotations

from django.urls import path

from submissions import views

app_name = "submissions"

urlpatterns = [
    path("moderation/", views.queue, name="queue"),
    path("moderation/decide/", views.decide, name="decide"),
    path("moderation/log/", views.audit_log, name="log"),
    path("moderation/hardware/add/", views.add_hardware, name="add_hardware"),
    path("moderation/submitters/", views.submitters, name="submitters"),
    path("moderation/submitters/<int:user_id>/trust/", views.trust, name="trust"),
    path("device/", views.device, name="device"),
    path("runs/<int:run_id>/report/", views.report, name="report"),
]
