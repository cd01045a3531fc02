from __future__ import annotations

from django.urls import path

from lab import views

app_name = "lab"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("jobs/new/", views.new_job, name="new_job"),
    path("jobs/feed.atom", views.finished_jobs_feed, name="feed"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/cancel/", views.cancel, name="cancel"),
    path("hosts/", views.hosts, name="hosts"),
    path("hosts/<int:pk>/", views.host_detail, name="host"),
    path("hosts/<int:pk>/approve/", views.approve_host, name="approve_host"),
    path("hosts/keys/<int:pk>/revoke/", views.revoke_host_key, name="revoke_host_key"),
    path("prompts/<int:pk>/", views.prompt_detail, name="prompt"),
    path("notifications/", views.notification_settings, name="notifications"),
]
