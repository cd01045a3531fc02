"""Who may see what: the one place private run data is gated."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    from runs.models import Run

MODERATE_PERMISSION = "submissions.moderate_submission"


def is_moderator(user: User | AnonymousUser) -> bool:
    return bool(user.is_authenticated and user.has_perm(MODERATE_PERMISSION))


def owns(user: User | AnonymousUser, run: Run) -> bool:
    """Whether the run was submitted by this signed-in user (or API key's user)."""
    submission = getattr(run, "submission", None)
    return bool(user.is_authenticated and submission and submission.submitter_id == user.id)


def can_see_standing(user: User | AnonymousUser, run: Run) -> bool:
    """Where a run stands (runs.standing): everyone once it is published, else its owner only."""
    return run.published or owns(user, run)


def can_see_private(user: User | AnonymousUser, run: Run) -> bool:
    """Raw outputs, errors and metadata: the run's owner and moderators only."""
    if not user.is_authenticated:
        return False
    submission = getattr(run, "submission", None)
    owner_id = submission.submitter_id if submission else None
    return owner_id == user.id or is_moderator(user)
