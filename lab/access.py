"""Who may do what in the lab: one helper per kind of object, used by views, the API and
templates' context alike."""

from __future__ import annotations

OPERATE = "worker.operate_lab"


def can_operate(user) -> bool:
    """Queue jobs, see hosts and their servers, send quick prompts."""
    return bool(user and user.is_authenticated and user.has_perm(OPERATE))


def can_administer_hosts(user) -> bool:
    """Approve hosts and create or revoke their keys: an admin's call, not every operator's."""
    return bool(user and user.is_authenticated and user.is_staff)


def is_job_insider(user, job) -> bool:
    """The job's requester or a lab operator: sees its raw text and its webhook deliveries."""
    return bool(
        user and user.is_authenticated and (job.requested_by_id == user.id or can_operate(user))
    )


def can_cancel_job(user, job) -> bool:
    """An insider, while the job can still change."""
    return is_job_insider(user, job) and not job.is_final
