"""Which cage a run gets, that every result says so, and that no cage means no model code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from worker.engine import sandbox
from worker.engine.providers.base import ChatResponse
from worker.engine.sandbox import (
    LEVEL_NONE,
    LEVEL_OS,
    LEVEL_WEAK,
    OPT_IN_ENV,
    current_isolation,
    os_sandbox,
    parse_checks,
    run_python,
    seccomp,
)
from worker.engine.sandbox.runner import _weak
from worker.engine.suites import available_suites
from worker.engine.suites.base import RunContext
from worker.engine.suites.coding import verify

from .sandbox_kit import FAST, PRELUDE

PACKAGE = Path(sandbox.__file__).parent


def test_this_machine_has_the_os_sandbox():
    cage = os_sandbox()
    assert cage.level == LEVEL_OS, cage.reason
    assert "PID, mount, network" in cage.detail and "seccomp" in cage.detail


def test_every_result_and_verdict_records_its_isolation():
    result = run_python("print(1)\n", limits=FAST)
    assert result.isolation == os_sandbox().as_dict()
    task = available_suites()["coding"].tasks[4]  # roman_to_int
    verdict = verify(task, ChatResponse(content="```python\nx = 1\n```", finish_reason="stop"))
    assert verdict.details["sandbox"]["level"] == LEVEL_OS
    assert verdict.details["sandbox"]["detail"] == os_sandbox().detail


@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    """A machine without bubblewrap: it is really not on PATH, and the probe is redone."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(OPT_IN_ENV, raising=False)
    os_sandbox.cache_clear()
    _weak.cache_clear()
    yield
    monkeypatch.undo()
    os_sandbox.cache_clear()
    _weak.cache_clear()


@pytest.mark.usefixtures("no_bwrap")
def test_without_an_os_sandbox_model_code_is_refused_with_the_reason(tmp_path):
    cage = current_isolation()
    assert cage.level == LEVEL_NONE
    assert "bubblewrap is not installed" in cage.reason
    marker = tmp_path / "ran"
    result = run_python(f"open({str(marker)!r}, 'w')\n", limits=FAST, enforce_policy=False)
    assert result.status == "sandbox_unavailable" and not marker.exists()
    assert result.isolation["reason"] == cage.reason

    suite = available_suites()["coding"]
    task = suite.effective_tasks()[0]
    # The provider is never reached: refusing costs no inference.
    record = suite.run_task(task, RunContext(provider=None))
    assert record["execution_ok"] is False and record["score"] == 0.0
    assert record["error"].startswith("sandbox unavailable: bubblewrap is not installed")
    assert OPT_IN_ENV in record["error"]
    assert record["metadata"]["error_kind"] == "sandbox_unavailable"
    assert record["metadata"]["sandbox"]["level"] == LEVEL_NONE

    verdict = verify(task, ChatResponse(content="```python\nx = 1\n```", finish_reason="stop"))
    assert verdict.score == 0.0 and verdict.details["sandbox_status"] == "sandbox_unavailable"


@pytest.mark.usefixtures("no_bwrap")
def test_the_explicit_opt_in_runs_weakly_and_says_so(monkeypatch):
    monkeypatch.setenv(OPT_IN_ENV, "1")
    cage = current_isolation()
    assert cage.level == LEVEL_WEAK
    assert cage.detail.startswith("NO OS sandbox") and "seccomp filter" in cage.detail
    checks = parse_checks([{"expr": "f(3)", "expect": "9"}])
    result = run_python("def f(x):\n    return x * x\n", checks=checks, limits=FAST)
    assert result.outcomes[0].passed and result.isolation["level"] == LEVEL_WEAK
    # Even weak, the filter is there on Linux: no fork, no exec, no socket.
    escape = PRELUDE + "attempt('fork', lambda: get('fork')(osm)())\n"
    weak = run_python(escape, limits=FAST, enforce_policy=False)
    assert "fork BLOCKED PermissionError" in weak.stdout


def test_seccomp_tables_match_the_kernel_headers():
    headers = {
        "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        "aarch64": Path("/usr/include/asm-generic/unistd.h"),
    }
    compared = 0
    for arch, header in headers.items():
        if not header.exists():
            continue
        numbers = dict(re.findall(r"#define __NR_(\w+)\s+(\d+)\b", header.read_text()))
        table = seccomp.ARCHES[arch][1]
        assert {name: str(number) for name, number in table.items()} == {
            name: numbers[name] for name in table
        }
        assert set(seccomp.DENIED) - set(table) <= {"fork", "vfork", "iopl", "ioperm"} | {
            "modify_ldt",
            "uselib",
            "_sysctl",
        }
        compared += 1
    if not compared:
        pytest.skip("no kernel headers installed here")


def test_the_filter_is_well_formed_for_every_architecture():
    for arch in seccomp.ARCHES:
        program = seccomp.program(arch)
        assert program and len(program) % 8 == 0 and len(program) // 8 < 256
    assert seccomp.program("sparc64") is None


UNPRIVILEGED_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from sandbox import os_sandbox, parse_checks, run_python
cage = os_sandbox()
checks = parse_checks([{"expr": "f(2)", "expect": "4"}, {"expr": "None", "expect": "'hidden'"}])
judged = run_python("def f(x):\\n    return x + x\\n", checks=checks)
escape = run_python(sys.argv[2], enforce_policy=False)
print(json.dumps({"level": cage.level, "detail": cage.detail, "reason": cage.reason,
                  "passed": [o.passed for o in judged.outcomes or []], "escape": escape.stdout}))
"""


def test_the_sandbox_works_for_an_unprivileged_user():
    # The container runs tests as root; a user's machine runs the CLI as a normal user. Run
    # the sandbox once as uid 65534, from a copy of the package that user can read.
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to switch to an unprivileged user")
    python = "/usr/bin/python3.11" if os.access("/usr/bin/python3.11", os.X_OK) else None
    if python is None:
        pytest.skip("no interpreter an unprivileged user can run")
    escape = PRELUDE + (
        "attempt('fork', lambda: get('fork')(osm)())\n"
        "attempt('passwd', lambda: real_open('/etc/passwd').read())\n"
        "attempt('net', lambda: real_import('socket').create_connection(('127.0.0.1', 5432)))\n"
    )
    root = Path(tempfile.mkdtemp(prefix="benchloop-unpriv-"))
    try:
        shutil.copytree(PACKAGE, root / "sandbox", ignore=shutil.ignore_patterns("__pycache__"))
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755)
        done = subprocess.run(
            ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
            + [python, "-I", "-c", UNPRIVILEGED_SCRIPT, str(root), escape],
            capture_output=True,
            timeout=120,
            env={"PATH": os.defpath},
            cwd="/",
            check=False,
        )
    finally:
        shutil.rmtree(root)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["level"] == LEVEL_OS, report["reason"]
    assert "as this user" in report["detail"]
    assert report["passed"] == [True, False]
    for line in ("fork BLOCKED PermissionError", "passwd BLOCKED FileNotFoundError"):
        assert line in report["escape"]
    assert "net BLOCKED PermissionError" in report["escape"]


def test_the_package_has_no_import_outside_the_standard_library():
    # So the unprivileged copy above is the real thing, not a lookalike with fewer layers.
    for path in PACKAGE.glob("*.py"):
        imports = re.findall(r"^(?:from|import) (\w+)", path.read_text(), re.MULTILINE)
        assert set(imports) <= set(sys.stdlib_module_names) | {"__future__"}, path.name
