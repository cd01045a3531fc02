"""Helpers for running the engine against a real local LLM server in tests and benches."""

from __future__ import annotations
