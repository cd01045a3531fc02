from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

_NEXT_THEME = {"auto": "dark", "dark": "light", "light": "auto"}


def site(request: HttpRequest) -> dict:
    """The demo banner and the visitor's theme choice (a cookie, so no inline script is needed)."""
    theme = request.COOKIES.get("theme", "auto")
    if theme not in _NEXT_THEME:
        theme = "auto"
    return {
        "demo_banner": settings.BENCHLOOP_DEMO_BANNER,
        "theme": theme,
        "next_theme": _NEXT_THEME[theme],
    }
