"""Hostile model code cannot act outside the sandbox or fake a result, whatever trick it finds.

Each class of escape has several variants. Most pass the AST policy on purpose (string attribute
access through safe modules beats any policy of that kind), and the rest run with
``enforce_policy=False``, so what is proven here is the OS layers and the parent's judging on
their own. Process and resource limits are in test_sandbox_limits.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time

import pytest

from worker.engine.sandbox import check_policy, parse_check, run_python
from worker.engine.suites import DATA_DIR

from .sandbox_kit import ATTEMPT, FAST, HARNESS_WALK, PRELUDE, secret_check

PYTHON = "/usr/bin/python3.11"  # any binary inside the sandbox's view would do


def _policy_passes(code: str) -> None:
    # The point of these variants: the friendly layer does not see them, so it cannot be what
    # stops them.
    assert check_policy(code) == [], check_policy(code)


# --------------------------------------------------------------------------------------------
# Attribute access by string, to the child's real ``os``

STRING_ROUTES = {
    "attrgetter_chain": "osm = harness['os']\n",
    "formatter_get_field": (
        "import string\n"
        "osm = string.Formatter().get_field("
        "'0.__globals__[__builtins__][__import__].__globals__[os]', (probe,), {})[0]\n"
    ),
    "subclasses_walk": (
        "subs = operator.methodcaller('__subclasses__')(get('__class__.__base__')(()))\n"
        "wrap = [c for c in subs if get('__name__')(c) == '_wrap_close'][0]\n"
        "osm = real_import(get('__init__.__globals__')(wrap)['__name__'])\n"
    ),
    "functools_reduce": (
        "import functools\n"
        "steps = [get('__globals__'), operator.itemgetter('__builtins__'),\n"
        "         operator.itemgetter('__import__'), get('__globals__'),\n"
        "         operator.itemgetter('os')]\n"
        "osm = functools.reduce(lambda o, step: step(o), steps, probe)\n"
    ),
}


def _harmful_actions(marker) -> str:
    """Child code that tries a shell, a host write, a fork and an exec with ``osm``."""
    return (
        "call = lambda name, *a: get(name)(osm)(*a)\n"
        f"attempt('system', lambda: call('system', 'touch {marker}.sh'))\n"
        f"attempt('write', lambda: call('open', '{marker}.w', get('O_WRONLY')(osm)"
        " | get('O_CREAT')(osm)))\n"
        "attempt('fork', lambda: call('fork'))\n"
        f"attempt('exec', lambda: call('execv', '{PYTHON}', ['py', '-c', 'print(\"EXECUTED\")']))\n"
    )


@pytest.fixture
def marker(tmp_path):
    tmp_path.chmod(0o777)  # so only the sandbox, not file permissions, stops a write as nobody
    return tmp_path / "escaped"


@pytest.mark.parametrize("route", sorted(STRING_ROUTES))
def test_string_attribute_access_reaches_nothing(route, marker):
    code = HARNESS_WALK + STRING_ROUTES[route] + ATTEMPT + _harmful_actions(marker)
    _policy_passes(code)
    check, _ = secret_check()
    result = run_python(code, checks=[check], limits=FAST)
    assert "fork BLOCKED PermissionError" in result.stdout, result.stderr
    assert "exec BLOCKED PermissionError" in result.stdout
    assert "EXECUTED" not in result.stdout
    assert "system DONE 32512" in result.stdout  # /bin/sh could not even be started
    assert not (marker.parent / "escaped.sh").exists()
    assert not (marker.parent / "escaped.w").exists()
    assert result.outcomes[0].passed is False


def test_format_string_attribute_walks_see_no_expected_value():
    # str.format can read any attribute chain: dump everything the child holds, job included.
    check, secret = secret_check()
    real = parse_check({"expr": "double(21)", "expect": "'forty-two'"})
    code = (
        "def double(x):\n    return x * 2\n"
        "print('{0.__globals__[__builtins__][__import__].__globals__}'.format(double))\n"
        + PRELUDE
        + "frame = get('_getframe')(real_import('sys'))(0)\n"
        "while frame is not None:\n"
        "    print(get('f_locals')(frame), get('f_code.co_consts')(frame))\n"
        "    frame = get('f_back')(frame)\n"
    )
    _policy_passes(code)
    result = run_python(code, checks=[check, real], limits=FAST)
    assert "double(21)" in result.stdout  # the walk did reach the job the child was given
    assert secret not in result.stdout and "forty-two" not in result.stdout
    assert [o.passed for o in result.outcomes] == [False, False]


# --------------------------------------------------------------------------------------------
# Private references to os/sys inside modules the policy allows

PRIVATE_ROUTES = {
    "random._os": "import random\nosm = get('_os')(random)\n",
    "typing.sys": "import typing\nosm = get('sys.modules')(typing)['os']\n",
    "collections._sys": "import collections\nosm = get('_sys.modules')(collections)['posix']\n",
    "enum.sys": "import enum\nosm = get('sys.modules')(enum)['os']\n",
    "dataclasses.sys": "import dataclasses\nosm = get('sys.modules')(dataclasses)['os']\n",
}


@pytest.mark.parametrize("route", sorted(PRIVATE_ROUTES))
def test_private_module_references_reach_nothing(route, marker):
    code = "import operator\nget = operator.attrgetter\n" + PRIVATE_ROUTES[route]
    code += ATTEMPT + _harmful_actions(marker)
    _policy_passes(code)
    result = run_python(code, limits=FAST)
    assert "fork BLOCKED PermissionError" in result.stdout, result.stderr
    assert "exec BLOCKED PermissionError" in result.stdout
    assert "EXECUTED" not in result.stdout
    assert not (marker.parent / "escaped.sh").exists()
    assert not (marker.parent / "escaped.w").exists()


# --------------------------------------------------------------------------------------------
# Rewriting the harness's globals and builtins to fake a report

REVIEWER_ESCAPE = """\
import operator, random
get = operator.attrgetter
def f():
    pass
harness = get('__globals__')(get('__globals__')(f)['__builtins__']['__import__'])
harness['_BLOCKED'] = ('no.such.event',)
harness['_TESTS'] = ['pass']
shell = get('_os.system')(random)
shell('id > {marker}.id; touch {marker}.file; setsid sleep 300 >/dev/null 2>&1 < /dev/null &')
"""

FORGERIES = {
    # Lines in the report format for every descriptor the report could be on, then exit.
    "forged_report_lines": PRELUDE + "lines = b'{\"load\": \"ok\"}\\n' + b''.join(\n"
    '    b\'{"i": %d, "value": %s}\\n\' % (i, v) for i in range(4)\n'
    '    for v in (b\'["bool", true]\', b\'["str", "pass"]\', b\'["int", "1"]\'))\n'
    "for fd in range(3, 40):\n"
    "    attempt(fd, lambda: get('write')(osm)(fd, lines))\n"
    "get('_exit')(osm)(0)\n",
    # Replace the child's value encoder: every check now reports what the model wants.
    "patched_encoder": PRELUDE + "harness['_encode'] = lambda *a: ['str', 'pass']\n",
    # Patch the builtins the encoder itself uses.
    "patched_builtins": PRELUDE
    + "b = harness['builtins']\nb.type = lambda v: bool\nb.str = lambda v: 'True'\n",
    "exit_before_checks": PRELUDE + "get('_exit')(osm)(0)\n",
    "system_exit": "raise SystemExit(0)\n",
    "stdout_report": (
        'print(\'@@benchloop-0@@{"loaded": true, "passed": 9, "total": 9, "failures": []}\')\n'
        'print(\'{"i": 1, "value": ["bool", true]}\')\n'
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_nothing_the_child_does_turns_a_failing_check_into_a_pass(forgery):
    secret, _ = secret_check()
    honest = parse_check({"expr": "double(2)", "expect": "4"})
    code = "def double(x):\n    return x * 2\n" + FORGERIES[forgery]
    result = run_python(code, checks=[honest, secret], limits=FAST, enforce_policy=False)
    assert result.outcomes[1].passed is False
    assert result.passed <= 1


def test_the_reviewers_ten_line_escape_is_contained(marker):
    # Reproduced against the previous sandbox first: it ran `id` as nobody, wrote files, left
    # `sleep 300` running after the timeout and scored 1/1 on `assert False`.
    code = REVIEWER_ESCAPE.format(marker=marker)
    _policy_passes(code)
    check, _ = secret_check()
    result = run_python(code, checks=[check], limits=FAST)
    assert result.outcomes == [result.outcomes[0]] and result.outcomes[0].passed is False
    assert not (marker.parent / "escaped.id").exists()
    assert not (marker.parent / "escaped.file").exists()


# --------------------------------------------------------------------------------------------
# Exec of other programs

EXECS = {
    "execv": "get('execv')(osm)('{py}', ['py', '-c', 'print(\"EXECUTED\")'])",
    "posix_spawn": "get('posix_spawn')(osm)('{py}', ['py', '-c', 'print(\"EXECUTED\")'], {{}})",
    "subprocess": "real_import('subprocess').run(['{py}', '-c', 'print(\"EXECUTED\")'])",
    "system": "get('system')(osm)('echo EXECUTED')",
    "ctypes_execve": (
        "(real_import('ctypes').CDLL(None, use_errno=True).execve(b'{py}', None, None),"
        " real_import('ctypes').get_errno())"
    ),
}


@pytest.mark.parametrize("route", sorted(EXECS))
def test_no_other_program_can_be_started(route):
    code = PRELUDE + f"attempt('exec', lambda: {EXECS[route].format(py=PYTHON)})\n"
    result = run_python(code, limits=FAST, enforce_policy=False)
    assert "exec " in result.stdout, result.stderr
    assert "EXECUTED" not in result.stdout
    # Refused with EPERM (an exception, or errno 1 from libc), or the shell never started.
    assert any(s in result.stdout for s in ("PermissionError", "DONE 32512", "DONE (-1, 1)"))


# --------------------------------------------------------------------------------------------
# Network


@pytest.fixture
def listener():
    """TCP and UDP servers on the host's loopback that record whether anyone reached them."""
    tcp, udp = socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.settimeout(0.2)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = tcp.accept()
                seen.append("tcp")
                conn.close()
            with contextlib.suppress(OSError):
                udp.recvfrom(100)
                seen.append("udp")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield {"tcp": tcp.getsockname()[1], "udp": udp.getsockname()[1]}, seen
    stop.set()
    thread.join(5)
    tcp.close()
    udp.close()


def _really_listening(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), 2):
        pass


@pytest.mark.parametrize("seccomp", [True, False], ids=["all_layers", "namespace_only"])
@pytest.mark.parametrize("target", ["listener_tcp", "listener_udp", "postgres", "redis"])
def test_no_network_even_to_services_listening_on_loopback(listener, target, seccomp):
    ports, seen = listener
    port = {"postgres": 5432, "redis": 6379}.get(target) or ports[target.split("_")[1]]
    udp = target == "listener_udp"
    if not udp:
        if target != "listener_tcp":
            _really_listening(port)  # the host reaches it: only the sandbox can stop the child
        action = f"real_import('socket').create_connection(('127.0.0.1', {port}), 2)"
    else:
        action = f"real_import('socket').socket(2, 2).sendto(b'hi', ('127.0.0.1', {port}))"
    code = PRELUDE + f"attempt('net', lambda: {action})\n"
    result = run_python(code, limits=FAST, enforce_policy=False, seccomp=seccomp)
    if seccomp:
        assert "net BLOCKED PermissionError" in result.stdout, result.stdout + result.stderr
    elif not udp:
        # The namespace has a loopback of its own, with nothing listening on it.
        assert "net BLOCKED ConnectionRefusedError" in result.stdout, result.stdout
    time.sleep(0.5 if udp else 0)  # a datagram, had it crossed, would be in by now
    assert seen == []


# --------------------------------------------------------------------------------------------
# Files outside the sandbox's view


@pytest.fixture
def host_secrets(tmp_path, monkeypatch):
    secret = f"host-secret-{os.urandom(6).hex()}"
    monkeypatch.setenv("BENCHLOOP_TEST_SECRET", secret)
    (tmp_path / "secret.txt").write_text(secret)
    tmp_path.chmod(0o755)
    return secret, tmp_path / "secret.txt"


READS = {
    "etc_passwd": "real_open('/etc/passwd').read()",
    "suite_answers": "real_open({suite!r}).read()",
    "proc_1_environ": "real_open('/proc/1/environ', 'rb').read()",
    "parent_environ": "real_open('/proc/{ppid}/environ', 'rb').read()",
    "parent_memory": "real_open('/proc/{ppid}/mem', 'rb').read(64)",
    "host_tmp_file": "real_open({secret_file!r}).read()",
    "project_tree": "get('listdir')(osm)({project!r})",
    "home": "get('listdir')(osm)('/home')",
}


@pytest.mark.parametrize("seccomp", [True, False], ids=["all_layers", "namespace_only"])
@pytest.mark.parametrize("route", sorted(READS))
def test_files_outside_the_sandbox_cannot_be_read(route, seccomp, host_secrets):
    secret, secret_file = host_secrets
    suite = DATA_DIR / "coding.suite.json"
    action = READS[route].format(
        suite=str(suite),
        ppid=os.getpid(),
        secret_file=str(secret_file),
        project=str(DATA_DIR.parents[3]),
    )
    code = PRELUDE + f"attempt('read', lambda: {action})\n"
    result = run_python(code, limits=FAST, enforce_policy=False, seccomp=seccomp)
    assert "read BLOCKED FileNotFoundError" in result.stdout, result.stdout + result.stderr
    for leak in (secret, "root:", "hello-world", "pyproject.toml", "checks"):
        assert leak not in result.stdout


def test_the_child_sees_only_libraries_stdlib_and_its_own_tmp(tmp_path):
    code = PRELUDE + (
        "ls = get('listdir')(osm)\n"
        "print(json.dumps({'root': sorted(ls('/')), 'etc': ls('/etc'), 'tmp': ls('/tmp'),\n"
        "    'site': [p for p in get('path')(real_import('sys'))],\n"
        "    'dist': ls('/usr/lib/python3/dist-packages')}))\n"
        "real_open('/tmp/mine.txt', 'w').write('x')\n"
        "attempt('write_usr', lambda: real_open('/usr/lib/new.txt', 'w'))\n"
        "attempt('write_root', lambda: real_open('/new.txt', 'w'))\n"
        "attempt('write_dev', lambda: real_open('/dev/new.txt', 'w'))\n"
    )
    code = "import json\n" + code
    result = run_python(code, limits=FAST, enforce_policy=False)
    view = json.loads(result.stdout.splitlines()[0])
    assert set(view["root"]) <= {"dev", "etc", "lib", "lib32", "lib64", "libx32", "tmp", "usr"}
    assert view["etc"] == ["ld.so.cache"] and view["tmp"] == [] and view["dist"] == []
    for name in ("write_usr", "write_root", "write_dev"):
        assert f"{name} BLOCKED OSError [Errno 30] Read-only file system" in result.stdout
    assert not os.path.exists("/tmp/mine.txt")  # the child's /tmp is its own


def test_the_only_descriptors_the_child_has_are_its_job_its_output_and_its_report():
    code = PRELUDE + (
        "fds = []\n"
        "for fd in range(100):\n"
        "    try:\n        get('fstat')(osm)(fd)\n        fds.append(fd)\n"
        "    except Exception:\n        pass\n"
        "print(len(fds), flush=True)\n"
        "attempt('write_job', lambda: get('write')(osm)(0, b'tampered'))\n"
    )
    # A long-lived worker holds many descriptors: the report's number in the parent is then
    # far above what the model's code would probe, yet the child's layout stays the same.
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(150)]
    try:
        result = run_python(code, limits=FAST, enforce_policy=False)
    finally:
        for fd in held:
            os.close(fd)
    assert result.stdout.splitlines()[0] == "4"  # stdin, stdout, stderr, report; no bwrap pipe
    assert "write_job BLOCKED OSError [Errno 9] Bad file descriptor" in result.stdout


# --------------------------------------------------------------------------------------------
# The friendly first layer still explains itself


@pytest.mark.parametrize(
    "code",
    [
        "__import__('os').system('id')",
        "().__class__.__bases__[0].__subclasses__()",
        "getattr(print, '__self__')",
        "eval('1+1')",
        "exec('x = 1')",
        "import importlib\nimportlib.import_module('os')",
        "from os import path",
        "import json\njson.decoder._sys",
        "__builtins__['open']('/etc/passwd')",
        "def g():\n    yield 1\nit = g()\nprint(it.gi_frame.f_back.f_globals)\n",
    ],
)
def test_obvious_escapes_are_rejected_by_the_policy_with_a_reason(code):
    result = run_python(code, limits=FAST)
    assert result.status == "policy_rejected"
    assert result.violations


def test_policy_allows_ordinary_code():
    code = (
        "from collections import Counter\n"
        "class Box:\n"
        "    def __init__(self):\n"
        "        self._items = []\n"
        "print(__name__, Counter('aab'))\n"
    )
    assert check_policy(code) == []
    assert check_policy("def broken(:\n")[0].startswith("syntax error")


def test_guarded_import_explains_a_refusal_at_runtime_too():
    result = run_python("import os\n", limits=FAST, enforce_policy=False)
    assert result.status == "error"
    assert "import of 'os' is not allowed in the sandbox" in result.stderr


def test_ordinary_standard_library_use_works_in_the_cage():
    code = (
        "import datetime, random, statistics\n"
        "print(statistics.median([3, 1, 2]))\n"
        "print(datetime.datetime.strptime('2024-02-29', '%Y-%m-%d').day)\n"
        "print('é'.encode('cp1252'), random.Random(3).randint(1, 9))\n"
    )
    result = run_python(code, limits=FAST)
    assert result.status == "ok", result.stderr
    assert result.stdout == "2\n29\nb'\\xe9' 4\n"
