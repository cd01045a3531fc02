from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse

_NEXT_THEME = {"auto": "dark", "dark": "light", "light": "auto"}


@cache
def _nav_urls() -> dict[str, str]:
    # The same on every request: reversing them once per process keeps every page's shell cheap
    # (thirteen {% url %} tags were an eighth of a cached leaderboard request).
    names = ("home", "leaderboard", "compare", "methodology", "data", "feed", "theme")
    return {name: reverse(f"leaderboard:{name}") for name in names} | {
        "lab": reverse("lab:queue"),
        "login": reverse("accounts:login"),
        "signup": reverse("accounts:signup"),
        "profile": reverse("accounts:profile"),
        "logout": reverse("accounts:logout"),
        "moderation": reverse("submissions:queue"),
        "api_docs": reverse("api-docs"),
        "api_schema": reverse("api-schema"),
    }


def visitor_theme(request: HttpRequest) -> str:
    """The visitor's theme choice (a cookie, so no inline script is needed)."""
    theme = request.COOKIES.get("theme", "auto")
    return theme if theme in _NEXT_THEME else "auto"


def site(request: HttpRequest) -> dict[str, Any]:
    """The demo banner (set where synthetic runs are seeded: scripts/serve.sh) and the visitor's
    theme."""
    theme = visitor_theme(request)
    return {
        "demo_banner": settings.BENCHLOOP_DEMO_BANNER,
        "nav": _nav_urls(),
        "theme": theme,
        "next_theme": _NEXT_THEME[theme],
    }
