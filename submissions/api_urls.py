from __future__ import annotations

from django.urls import path

from submissions import api, external_api, run_state_api

urlpatterns = [
    path("runs", api.RunUploadView.as_view(), name="api-run-upload"),
    path("runs/external", external_api.ExternalUploadView.as_view(), name="api-run-external"),
    path("runs/<int:pk>/state", run_state_api.RunStateView.as_view(), name="api-run-state"),
    path("device/start", api.DeviceStartView.as_view(), name="api-device-start"),
    path("device/token", api.DeviceTokenView.as_view(), name="api-device-token"),
    path("schemas/upload-1.json", api.UploadSchemaView.as_view(), name="api-upload-schema"),
]
