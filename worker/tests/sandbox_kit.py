"""Shared pieces of the sandbox tests: a full Python-level escape, secrets, a process watcher."""

from __future__ import annotations

import glob
import secrets
import threading
import time

from worker.engine.sandbox import Check, Limits, parse_check, run_python

FAST = Limits(wall_s=8, cpu_s=2)

# A complete Python-level compromise using only what the AST policy allows: a string attribute
# walk from the solution's own function to the child's real import, open and os. Everything a
# test does after this runs with the harness's own powers, so only the OS layers can stop it.
HARNESS_WALK = """\
import operator
get = operator.attrgetter
def probe():
    pass
harness = get('__globals__')(get('__globals__')(probe)['__builtins__']['__import__'])
real_import = get('__import__')(harness['builtins'])
real_open = get('open')(harness['builtins'])
"""
# Prints what happened to one attempted action, so a test can read it back from stdout
# (``get`` is operator.attrgetter, defined by the code before it).
ATTEMPT = """\
def attempt(name, action):
    try:
        print(name, 'DONE', repr(action())[:120], flush=True)
    except BaseException as exc:
        print(name, 'BLOCKED', get('__name__')(type(exc)), str(exc)[:120], flush=True)
"""
PRELUDE = HARNESS_WALK + "osm = harness['os']\n" + ATTEMPT


def secret_check() -> tuple[Check, str]:
    """A check no solution can pass: its expected value is a fresh secret only the parent has."""
    secret = f"secret-{secrets.token_hex(12)}"
    return parse_check({"expr": "None", "expect": repr(secret)}), secret


def alive(marker: str) -> bool:
    """Whether any process or thread on this machine carries ``marker`` in its name or argv."""
    for path in glob.glob("/proc/[0-9]*/task/[0-9]*/comm") + glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as handle:
                if marker.encode() in handle.read():
                    return True
        except OSError:
            continue
    return False


def watch(code: str, marker: str, **kwargs):
    """Run ``code`` while polling for ``marker``: (result, seen while running, alive after)."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=run_python(code, **kwargs)))
    seen = False
    thread.start()
    while thread.is_alive():
        seen = seen or alive(marker)
        time.sleep(0.02)
    thread.join()
    return box["result"], seen, alive(marker)


def set_name(marker: str) -> str:
    """Child code that names the calling thread ``marker`` (visible in /proc/*/task/*/comm)."""
    return f"real_import('ctypes').CDLL(None).prctl(15, {marker.encode()!r}, 0, 0, 0)\n"
