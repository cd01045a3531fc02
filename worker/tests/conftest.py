"""Fixtures for the engine and CLI tests."""

from __future__ import annotations

from worker.tests.llm_server import *  # noqa: F403
