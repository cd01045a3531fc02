"""GET /api/v1/runs/<id>/standing: where a run stands among its class (runs.standing).

Public for a published run; for any other run its owner only (an API key of the account that
submitted it), and "not found" to everyone else, so an unpublished run's existence does not leak.
`benchloop submit` and `benchloop compare RUN --site` print its sentences.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from core.links import absolute_url
from core.throttling import AnonThrottle, UserThrottle
from runs.models import Run
from runs.standing import MIN_PERCENTILE_N, SIMILAR_FACTOR, Place, Standing, standing_of
from submissions.access import can_see_standing


def _place(place: Place) -> dict[str, Any]:
    return {
        "n": place.n,
        "others": place.others,
        "below": place.below,
        "level": place.level,
        "percentile": place.percentile,
    }


def standing_body(standing: Standing) -> dict[str, Any]:
    """A standing as JSON: the figures and the sentences the site and the CLI show."""
    run = standing.run
    klass = run.hardware_class
    lane = standing.lane
    similar = standing.similar
    return {
        "id": run.id,
        "url": absolute_url(reverse("leaderboard:run", args=[run.id])),
        "published": run.published,
        "hardware_class": {"slug": klass.slug, "label": klass.label} if klass else None,
        "score_scale": run.score_scale,
        "benchmark_version": run.benchmark_version,
        "method": run.stack.method,
        "figure": standing.figure or None,
        "figure_label": standing.figure_label or None,
        "unit": standing.unit,
        "value": standing.value,
        "lane": None
        if lane is None
        else {**_place(lane.place), "others_median": lane.others_median},
        "similar": None
        if similar is None
        else {
            "active_params_b": similar.active_b,
            "low_b": similar.low_b,
            "high_b": similar.high_b,
            "factor": SIMILAR_FACTOR,
            "place": None if similar.place is None else _place(similar.place),
            "only": None
            if similar.only is None
            else {"stack": similar.only[0], "median": similar.only[1]},
        },
        "note": standing.note,
        "sentences": standing.sentences,
    }


_PLACE = {
    "n": serializers.IntegerField(help_text="figures compared, this run's included"),
    "others": serializers.IntegerField(),
    "below": serializers.IntegerField(help_text="others this run's figure is above"),
    "level": serializers.IntegerField(help_text="others level with it"),
    "percentile": serializers.IntegerField(
        allow_null=True,
        help_text=f"rank ÷ (n + 1), ties at their middle rank; null below n = {MIN_PERCENTILE_N}",
    ),
}


class RunStandingView(APIView):
    """Where a run stands: among its stack's runs on its hardware class, and against the class's
    other stacks of similar size, on the same score scale, benchmark version and method."""

    permission_classes = [AllowAny]
    throttle_classes = [AnonThrottle, UserThrottle]

    @extend_schema(
        responses={
            200: inline_serializer(
                "RunStanding",
                {
                    "id": serializers.IntegerField(),
                    "url": serializers.CharField(),
                    "published": serializers.BooleanField(
                        help_text="false: the places it would take (owner only)"
                    ),
                    "hardware_class": serializers.DictField(allow_null=True),
                    "score_scale": serializers.CharField(),
                    "benchmark_version": serializers.CharField(),
                    "method": serializers.CharField(),
                    "figure": serializers.CharField(
                        allow_null=True, help_text="overall, or decode on the speed-only scale"
                    ),
                    "figure_label": serializers.CharField(allow_null=True),
                    "unit": serializers.CharField(),
                    "value": serializers.FloatField(allow_null=True),
                    "lane": inline_serializer(
                        "StandingLane",
                        {**_PLACE, "others_median": serializers.FloatField(allow_null=True)},
                        allow_null=True,
                    ),
                    "similar": serializers.DictField(
                        allow_null=True,
                        help_text="stacks within `factor`× of the model's active parameters",
                    ),
                    "note": serializers.CharField(),
                    "sentences": serializers.ListField(child=serializers.CharField()),
                },
            ),
            404: OpenApiResponse(description="no such run, or not published and not yours"),
        }
    )
    def get(self, request: Request, pk: int) -> Response:
        run = (
            Run.objects.select_related("stack", "hardware_class", "submission")
            .defer("raw_payload")
            .filter(pk=pk)
            .first()
        )
        if run is None or not can_see_standing(request.user, run):
            # Someone else's unpublished run looks exactly like a missing one.
            raise ApiError(404, "not_found", "Not found.")
        return Response(standing_body(standing_of(run)))
