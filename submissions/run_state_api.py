"""GET /api/v1/runs/<id>/state: where the owner's upload stands now (pending, approved, …).

`benchloop list` asks this for each run it sent, so a run approved since shows "published", not
the "pending review" the upload answered. GET /api/v1/runs/<id> shows published runs only; this
one answers the owner (an API key with the submit scope) for any state, and 404 to anyone else.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from core.links import absolute_url
from core.throttling import AnonThrottle, UserThrottle
from submissions.models import Submission
from submissions.permissions import KeyRequest, scope_required


class RunStateView(APIView):
    """The state of one of your own runs: status, published, reviewed_at, url."""

    permission_classes = [scope_required("submit")]
    throttle_classes = [AnonThrottle, UserThrottle]

    @extend_schema(
        responses=inline_serializer(
            "RunState",
            {
                "id": serializers.IntegerField(),
                "client_run_id": serializers.CharField(),
                "status": serializers.CharField(),
                "published": serializers.BooleanField(),
                "url": serializers.CharField(),
            },
        )
    )
    def get(self, request: KeyRequest, pk: int) -> Response:
        found = (
            Submission.objects.filter(run_id=pk, submitter=request.user)
            .values_list("client_run_id", "status", "run__published")
            .first()
        )
        if found is None:  # someone else's run looks exactly like a missing one
            raise ApiError(404, "not_found", "Not found.")
        client_run_id, status, published = found
        return Response(
            {
                "id": pk,
                "client_run_id": client_run_id,
                "status": status,
                "published": published,
                "url": absolute_url(reverse("leaderboard:run", args=[pk])),
            }
        )
