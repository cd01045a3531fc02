"""The sandbox's limits: nothing outlives a run, bombs stay bounded, output is capped.

Every variant runs with the AST policy off; the ``namespace_only`` variants also switch the
seccomp filter off, to show that the PID namespace and the rlimits hold on their own.
"""

from __future__ import annotations

import secrets

import pytest

from worker.engine.sandbox import Limits, parse_check, run_python

from .sandbox_kit import FAST, PRELUDE, set_name, watch

SHORT = Limits(wall_s=3, cpu_s=10)


def _marker() -> str:
    return f"sbx{secrets.token_hex(5)}"  # fits the 15 characters of a thread name


# --------------------------------------------------------------------------------------------
# Survivors after the timeout (and after a normal exit)


def test_a_thread_spinning_past_the_timeout_dies_with_the_run():
    marker = _marker()
    code = PRELUDE + (
        "threading = real_import('threading')\n"
        "def spin():\n" + "    " + set_name(marker) + "    while True:\n        pass\n"
        "threading.Thread(target=spin).start()\n"
        "while True:\n    pass\n"
    )
    result, seen, after = watch(code, marker, limits=SHORT, enforce_policy=False)
    assert result.status == "timeout"
    assert seen and not after


def test_setsid_double_fork_and_exec_cannot_outlive_the_timeout():
    marker = _marker()
    code = PRELUDE + (
        "if get('fork')(osm)() == 0:\n"
        "    get('setsid')(osm)()\n"
        "    if get('fork')(osm)() == 0:\n"
        "        get('execv')(osm)('/usr/bin/python3.11',\n"
        f"            ['py', '-c', 'import time; time.sleep(300)', '{marker}'])\n"
        "    get('_exit')(osm)(0)\n"
        "while True:\n    pass\n"
    )
    # Without the filter fork and exec work, so what is left to stop them is the namespace.
    result, seen, after = watch(code, marker, limits=SHORT, enforce_policy=False, seccomp=False)
    assert result.status == "timeout"
    assert seen and not after


def test_a_detached_child_dies_when_the_solution_exits_normally():
    marker = _marker()
    code = PRELUDE + (
        "if get('fork')(osm)() == 0:\n"
        "    get('setsid')(osm)()\n"
        "    signal = real_import('signal')\n"
        "    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
        "        signal.signal(s, signal.SIG_IGN)\n"
        "    " + set_name(marker) + "    real_import('time').sleep(300)\n"
        "real_import('time').sleep(1)\n"
        "print('parent done')\n"
    )
    result, seen, after = watch(code, marker, limits=SHORT, enforce_policy=False, seccomp=False)
    assert result.status == "ok" and "parent done" in result.stdout
    assert seen and not after


def test_with_the_filter_a_survivor_cannot_even_be_started():
    code = PRELUDE + (
        "attempt('setsid', lambda: get('setsid')(osm)())\n"
        "attempt('fork', lambda: get('fork')(osm)())\n"
    )
    result = run_python(code, limits=FAST, enforce_policy=False)
    assert "fork BLOCKED PermissionError" in result.stdout


# --------------------------------------------------------------------------------------------
# Fork bombs and thread bombs


def test_fork_bomb_is_refused_at_the_first_fork():
    code = PRELUDE + "while True:\n    get('fork')(osm)()\n"
    result = run_python(code, limits=FAST, enforce_policy=False)
    assert result.status == "error"
    assert "PermissionError" in result.stderr
    assert result.wall_ms < 5000


def test_fork_bomb_without_the_filter_is_bounded_and_leaves_nothing():
    marker = _marker()
    code = (
        PRELUDE
        + set_name(marker)
        + (
            "fork = get('fork')(osm)\n"
            "while True:\n"
            "    try:\n        fork()\n"
            "    except Exception:\n        pass\n"
        )
    )
    result, seen, after = watch(code, marker, limits=SHORT, enforce_policy=False, seccomp=False)
    assert result.status in {"timeout", "cpu_limit"}
    assert seen and not after


def test_thread_bomb_stops_at_the_process_limit():
    code = PRELUDE + (
        "threading = real_import('threading')\ntime = real_import('time')\nstarted = 0\n"
        "try:\n"
        "    while started < 1000:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "        started += 1\n"
        "except RuntimeError as exc:\n"
        "    print('stopped at', started, exc, flush=True)\n"
        "get('_exit')(osm)(0)\n"
    )
    result = run_python(code, limits=Limits(wall_s=8, processes=16), enforce_policy=False)
    assert "stopped at" in result.stdout, result.stdout + result.stderr
    assert int(result.stdout.split()[2]) < 16


# --------------------------------------------------------------------------------------------
# Memory bombs


@pytest.mark.parametrize(
    "code",
    [
        "hoard = []\nwhile True:\n    hoard.append(' ' * 10 ** 6)\n",
        "x = 'ab'\nwhile True:\n    x = x + x\n",
    ],
    ids=["growing_list", "doubling_string"],
)
def test_memory_bombs_hit_the_address_space_limit(code):
    result = run_python(code, limits=FAST)
    assert result.status == "memory_limit", result.stderr


def test_one_huge_block_is_refused_but_leaves_no_evidence_of_a_limit():
    """A single 10 GiB request fails at once: the kernel counted no memory near the limit, so
    the verdict is the plain ``error`` (the child's MemoryError is its own word)."""
    result = run_python("blob = bytearray(10 * 1024 ** 3)\nprint('allocated')\n", limits=FAST)
    assert result.status == "error", result.stderr
    assert "allocated" not in result.stdout


def test_a_child_that_says_memoryerror_is_not_a_memory_limit():
    """The verdict words are the parent's: printing "MemoryError" and exiting 3 is an error."""
    code = PRELUDE + (
        "real_import('sys').stderr.write('MemoryError\\nFile too large\\n')\n"
        "real_import('sys').stderr.flush()\n"
        "get('_exit')(osm)(3)\n"
    )
    result = run_python(code, limits=FAST, enforce_policy=False)
    assert "MemoryError" in result.stderr and result.returncode == 3, result.stderr
    assert result.status == "error"


def test_filling_the_private_tmp_stops_at_its_size():
    code = PRELUDE + (
        "written = 0\n"
        "try:\n"
        "    for i in range(200):\n"
        "        with real_open(f'/tmp/fill{i}', 'wb') as f:\n"
        "            written += f.write(b'x' * 1000000)\n"
        "except Exception as exc:\n"
        "    print('stopped after', written, exc)\n"
    )
    result = run_python(code, limits=FAST, enforce_policy=False)
    assert "No space left on device" in result.stdout, result.stdout + result.stderr
    assert int(result.stdout.split()[2]) <= 16 * 1024 * 1024


# --------------------------------------------------------------------------------------------
# Big output


def test_stdout_flood_hits_the_file_size_limit():
    result = run_python("print('x' * 5_000_000)", limits=FAST)
    assert result.status == "output_limit"
    assert len(result.stdout) <= 64 * 1024


def test_stderr_flood_is_capped_too():
    flood = "err = get('stderr')(real_import('sys'))\nwhile True:\n    err.write('z' * 10000)\n"
    result = run_python(PRELUDE + flood, limits=FAST, enforce_policy=False)
    assert result.status == "output_limit"
    assert len(result.stderr) <= 64 * 1024


def test_a_flooded_report_is_read_with_a_bound_and_fails_its_check():
    check = parse_check({"expr": "1", "expect": "1"})
    code = PRELUDE + (
        'junk = b\'{"i": 0, "value": ["int", "2"]}\' + b\' \' * 100000 + b\'\\n\'\n'
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        while True:\n            get('write')(osm)(fd, junk)\n"
        "    except Exception:\n        pass\n"
    )
    result = run_python(code, checks=[check], limits=FAST, enforce_policy=False)
    assert [o.passed for o in result.outcomes] == [False]


@pytest.mark.parametrize(
    "expr",
    ["list(range(10 ** 6))", "deep", "'x' * 10 ** 6"],
    ids=["million_items", "deeply_nested", "megabyte_string"],
)
def test_oversized_values_fail_their_check_without_harm(expr):
    check = parse_check(
        {"setup": "deep = []\nfor _ in range(500):\n    deep = [deep]", "expr": expr, "expect": "0"}
    )
    result = run_python("pass\n", checks=[check], limits=FAST)
    assert result.status == "ok", result.stderr
    assert result.outcomes[0].passed is False
    assert result.outcomes[0].note == "value not reported"
