"""Where a run stands among its hardware class, as its site says (GET /api/v1/runs/<id>/standing):
printed after `benchloop submit`, and by `benchloop compare RUN --site URL`.

A run waiting for review is shown where it would stand once approved (the site answers its owner
with the places it would take among the runs published now, and says so); a published run's
standing is public.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console
from rich.text import Text

from worker.cli.formatting import print_json, say
from worker.cli.listing import SUBMISSION_FILE
from worker.engine.bundle import find_run
from worker.engine.errors import AuthError, EngineError, UsageError

_RUN_URL = re.compile(r"^(https?://[^/?#]+(?:/[^?#]*)?)/runs/(\d+)/?$")
# Text from a site, printed in a terminal: no control characters (escape sequences).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _clean(text: object) -> str:
    return _CONTROL.sub(" ", str(text))


def render_standing(out: Console, body: dict) -> None:
    """The standing's note and sentences, each wrapped by us; the run's link whole, alone."""
    note = body.get("note")
    if note:
        say(out, _clean(note), style="dim")
    for sentence in body.get("sentences") or []:
        say(out, _clean(sentence), first="  - ", indent="    ")


def _optional_key(site: str) -> str | None:
    """The key for this site if there is one: a published run's standing needs none."""
    from worker.engine.site import api_key_for

    try:
        return api_key_for(site)
    except AuthError:
        return None


def ask_quietly(site: str, key: str | None, run_id: object) -> tuple[dict | None, str]:
    """The standing of the run just sent, or None and why not: asking fails nothing."""
    from worker.engine.site import run_standing

    if not isinstance(run_id, int) or isinstance(run_id, bool):
        return None, "the site's answer named no run id"
    try:
        body = run_standing(site, key, run_id)
    except EngineError as exc:
        return None, f"the site could not say ({_clean(exc.message)})"
    if body is None:
        return None, "this site does not say (it may predate standings)"
    return body, ""


def after_submit(out: Console, err: Console, site: str, key: str, run_id: object) -> None:
    """Print where the run just sent stands (or, waiting for review, where it would)."""
    body, why_not = ask_quietly(site, key, run_id)
    if body is None:
        say(err, f"Where it stands: {why_not}.", style="dim")
        return
    say(out, "Where it stands:", style="bold")
    render_standing(out, body)


def _sent_to(path: Path) -> tuple[str, int]:
    """The site and site run id a local run was sent to (its submission.json)."""
    run = path.parent.name
    try:
        record = json.loads((path.parent / SUBMISSION_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"run {run} was never sent to a site",
            hint=f"Send it first (`benchloop submit {run}`), or name a site's run by its "
            "page's address (https://…/runs/ID/).",
        ) from None
    except (OSError, ValueError):
        record = None
    found = _RUN_URL.match(str(record.get("url") or "")) if isinstance(record, dict) else None
    site = record.get("site") if isinstance(record, dict) else None
    if found is None or not isinstance(site, str):
        raise UsageError(
            f"run {run}'s {SUBMISSION_FILE} does not say where it went",
            hint=f"Send it again: `benchloop submit {run}`.",
        )
    return site.rstrip("/"), int(found.group(2))


def is_run_address(ref: str) -> bool:
    """Whether ``ref`` is a run page's address (which names its site)."""
    return _RUN_URL.match(ref) is not None


def _target(ref: str, site_flag: str | None) -> tuple[str, int]:
    """(site, site run id) for RUN: a local run's id, a site run id, or a run page's address."""
    from worker.engine.site import site_url

    page = _RUN_URL.match(ref)
    if page:
        return (site_url(site_flag) if site_flag else page.group(1).rstrip("/")), int(page[2])
    try:
        path = find_run(ref)
    except UsageError:
        if not ref.isdigit():
            raise
        return site_url(site_flag), int(ref)
    sent_site, run_id = _sent_to(path)
    if site_flag and site_url(site_flag) != sent_site:
        raise UsageError(
            f"run {path.parent.name} was sent to {sent_site}, not {site_url(site_flag)}",
            hint="Leave out --site to ask the site it was sent to.",
        )
    return sent_site, run_id


def cmd_standing(args: argparse.Namespace, out: Console) -> int:
    """`benchloop compare RUN --site URL`: where RUN stands among its class on the site."""
    from worker.engine.site import run_standing

    site, run_id = _target(args.run_a, args.site)
    body = run_standing(site, _optional_key(site), run_id)
    if body is None:
        raise UsageError(
            f"{site} shows no run {run_id} to this key",
            hint="It is not there, or it is not published and was sent with another account.",
        )
    if args.json:
        print_json(body)
        return 0
    say(out, f"Where the site's run {run_id} stands:", style="bold")
    render_standing(out, body)
    url = body.get("url")
    if isinstance(url, str) and urlsplit(url).scheme in ("http", "https"):
        # On a line of its own and never wrapped, so it can be clicked or copied whole.
        out.print(Text(_clean(url)), soft_wrap=True)
    return 0
