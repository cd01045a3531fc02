"""`{{ value|redact }}`: the one redaction (worker.rules.redact) for text shown in templates."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeData, mark_safe

from worker.rules.redact import redact_text

register = template.Library()


@register.filter
def redact(value: object) -> str:
    """The value as text without addresses, secrets or personal paths.

    Plain text is escaped as usual afterwards. Text already escaped (the output of `join`)
    stays marked safe: the redaction marker has no HTML special characters in it.
    """
    text = redact_text(value)
    return mark_safe(text) if isinstance(value, SafeData) else text  # noqa: S308
