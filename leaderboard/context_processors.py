from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def site(request: HttpRequest) -> dict:
    return {"demo_banner": settings.BENCHLOOP_DEMO_BANNER}
