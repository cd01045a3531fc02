"""The code sandbox holds against hostile model output, one test per attack.

Where an attack is stopped by the AST policy, a second run with ``enforce_policy=False`` shows
that the runtime layer (reduced builtins, guarded import, rlimits) stops it as well.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading

import pytest

from worker.engine.sandbox import Limits, check_policy, run_python, sandbox_setup

FAST = Limits(wall_s=8, cpu_s=2)


def test_plain_code_runs_and_prints():
    result = run_python("import math\nprint(math.factorial(5))", limits=FAST)
    assert result.status == "ok"
    assert result.stdout == "120\n"
    assert result.isolation  # always says how (or whether) the network was cut off


def test_fork_bomb():
    bomb = "import os\nwhile True:\n    os.fork()\n"
    assert run_python(bomb, limits=FAST).status == "policy_rejected"
    runtime = run_python(bomb, limits=FAST, enforce_policy=False)
    assert runtime.status == "error"
    assert "import of 'os' is not allowed" in runtime.stderr


def test_infinite_loop_is_stopped_by_cpu_limit_or_wall_clock():
    result = run_python("while True:\n    pass\n", limits=Limits(wall_s=6, cpu_s=1))
    assert result.status in {"cpu_limit", "timeout"}
    assert result.wall_ms < 7000


def test_ten_gigabyte_allocation_hits_the_address_space_limit():
    result = run_python("blob = bytearray(10 * 1024 ** 3)\nprint('allocated')", limits=FAST)
    assert result.status == "memory_limit"
    assert "allocated" not in result.stdout


def test_writing_outside_the_temp_dir(tmp_path):
    target = tmp_path / "escaped.txt"
    code = f"with open({str(target)!r}, 'w') as f:\n    f.write('x')\n"
    rejected = run_python(code, limits=FAST)
    assert rejected.status == "policy_rejected"
    assert any("'open'" in v for v in rejected.violations)
    runtime = run_python(code, limits=FAST, enforce_policy=False)
    assert runtime.status == "error"
    assert "NameError" in runtime.stderr
    assert not target.exists()


def test_os_system(tmp_path):
    marker = tmp_path / "ran"
    code = f"import os\nos.system('touch {marker}')\n"
    assert run_python(code, limits=FAST).status == "policy_rejected"
    runtime = run_python(code, limits=FAST, enforce_policy=False)
    assert "not allowed in the sandbox" in runtime.stderr
    assert not marker.exists()


def test_subprocess(tmp_path):
    marker = tmp_path / "ran"
    code = f"import subprocess\nsubprocess.run(['touch', '{marker}'])\n"
    assert run_python(code, limits=FAST).status == "policy_rejected"
    runtime = run_python(code, limits=FAST, enforce_policy=False)
    assert "import of 'subprocess' is not allowed" in runtime.stderr
    assert not marker.exists()


@pytest.fixture
def listener():
    """A TCP server on the host's loopback that records whether anyone connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    seen: list[bool] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            seen.append(True)
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() at once
    server.close()
    thread.join(6)


def test_socket_connect_to_loopback(listener):
    port, seen = listener
    code = (
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\nprint('connected')\n"
    )
    assert run_python(code, limits=FAST).status == "policy_rejected"
    runtime = run_python(code, limits=FAST, enforce_policy=False)
    assert "import of 'socket' is not allowed" in runtime.stderr
    assert "connected" not in runtime.stdout
    assert seen == []


def test_network_namespace_blocks_loopback_even_with_a_real_socket(listener):
    # The third layer on its own: plain Python (no policy, no guarded import) under the same
    # prefix cannot reach the host's loopback.
    port, seen = listener
    prefix, python, isolated, note = sandbox_setup()
    if not isolated:
        pytest.skip(f"no network namespace here: {note}")
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\n"
    done = subprocess.run([*prefix, python, "-c", code], capture_output=True, timeout=20)
    assert done.returncode != 0
    assert seen == []


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
    ],
)
def test_import_and_dunder_tricks_are_rejected(code):
    result = run_python(code, limits=FAST)
    assert result.status == "policy_rejected"
    assert result.violations


def test_dunder_import_is_guarded_at_runtime_too():
    runtime = run_python("__import__('os').system('id')", limits=FAST, enforce_policy=False)
    assert runtime.status == "error"
    assert "import of 'os' is not allowed" in runtime.stderr


def test_reading_etc_passwd():
    code = "print(open('/etc/passwd').read())"
    assert run_python(code, limits=FAST).status == "policy_rejected"
    runtime = run_python(code, limits=FAST, enforce_policy=False)
    assert "root:" not in runtime.stdout
    assert "NameError" in runtime.stderr


def test_output_flood_hits_the_file_size_limit():
    result = run_python("print('x' * 5_000_000)", limits=FAST)
    assert result.status == "output_limit"
    assert len(result.stdout) <= 64 * 1024


def test_policy_allows_ordinary_code():
    code = (
        "from collections import Counter\n"
        "class Box:\n"
        "    def __init__(self):\n"
        "        self._items = []\n"
        "print(__name__, Counter('aab'))\n"
    )
    assert check_policy(code) == []


def test_syntax_error_is_reported_as_a_violation():
    assert check_policy("def broken(:\n")[0].startswith("syntax error")


def test_hidden_tests_report_passes_and_failures():
    code = "def double(x):\n    return x * 2\n"
    result = run_python(code, tests=["assert double(2) == 4", "assert double(3) == 7"], limits=FAST)
    assert result.status == "ok"
    assert (result.tests["passed"], result.tests["total"]) == (1, 2)


def test_printed_output_cannot_fake_a_test_report():
    code = 'print(\'{"loaded": true, "passed": 9, "total": 9, "failures": []}\')\n'
    result = run_python(code, tests=["assert False"], limits=FAST)
    assert (result.tests["passed"], result.tests["total"]) == (0, 1)


def test_frame_walking_escape_is_rejected():
    code = "def g():\n    yield 1\nit = g()\nnext(it)\nprint(it.gi_frame.f_back.f_globals)\n"
    result = run_python(code, limits=FAST)
    assert result.status == "policy_rejected"


# The classic escape the AST policy exists to stop: from any object back to the ``os`` module
# through ``object.__subclasses__()``. Run without the policy, the audit hook must still refuse.
ESCAPE = (
    "g = [c for c in ().__class__.__base__.__subclasses__()"
    " if c.__name__ == '_wrap_close'][0].__init__.__globals__\n"
)


@pytest.mark.parametrize(
    ("action", "blocked"),
    [
        ("g['system']('touch {marker}')", "os.system blocked"),
        ("g['fork']()", "os.fork blocked"),
        ("g['execv']('/bin/sh', ['sh', '-c', 'touch {marker}'])", "os.exec blocked"),
        ("print(g['open']('/etc/passwd', 0))", "open('/etc/passwd') blocked"),
        ("g['open']('{marker}', g['O_WRONLY'] | g['O_CREAT'])", "blocked"),
        # importlib's pure-Python path loads socket.py; its C half is where the hook says no.
        ("g['sys'].modules['importlib'].import_module('socket')", "import of '_socket' blocked"),
    ],
)
def test_object_graph_escape_is_stopped_at_runtime(tmp_path, action, blocked):
    marker = tmp_path / "escaped"
    tmp_path.chmod(0o777)  # so only the sandbox, not file permissions, stops a write as nobody
    code = ESCAPE + action.format(marker=marker) + "\n"
    assert run_python(code, limits=FAST).status == "policy_rejected"
    runtime = run_python(code, limits=FAST, enforce_policy=False)
    assert runtime.status == "error"
    assert "sandbox: " in runtime.stderr and blocked in runtime.stderr
    assert "root:" not in runtime.stdout
    assert not marker.exists()


def test_ordinary_standard_library_use_passes_the_audit_hook():
    code = (
        "import datetime, random, statistics\n"
        "print(statistics.median([3, 1, 2]))\n"
        "print(datetime.datetime.strptime('2024-02-29', '%Y-%m-%d').day)\n"
        "print('é'.encode('cp1252'), random.Random(3).randint(1, 9))\n"
    )
    result = run_python(code, limits=FAST)
    assert result.status == "ok", result.stderr
    assert result.stdout == "2\n29\nb'\\xe9' 4\n"
