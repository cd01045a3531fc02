#!/usr/bin/env bash
# README command 2: the whole test suite on PostgreSQL and Redis (started here if stopped).
# `--fast` is the edit-test loop's lane: everything but the tests that drive the real llama.cpp
# server (marker llm), headless Chromium (browser), a fault drill (drill) or a 100,000-run
# database (scale), and the harness matrix (worker/tests/test_matrix_*.py). CI runs the whole
# suite.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
ensure_venv "dev"

fast=false
if [ "${1:-}" = "--fast" ]; then
  fast=true
  shift
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "==> starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "==> starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi

# Debian packages the tests drive for real, installed once where missing (root only):
# chromium for the browser tests (never a downloaded browser build), bubblewrap for the code
# sandbox's OS layer (docs/sandbox.md), nginx + envsubst for docker-compose's proxy (no Docker here).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v envsubst >/dev/null 2>&1 || missing+=(gettext-base)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = "0" ]; then
  echo "==> installing Debian's ${missing[*]} for the tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The real harness programs the matrix tests run (aider-chat, hermes-agent, mini-swe-agent at
# the pins in pyproject.toml), each in its own virtualenv under ~/.cache/benchloop/harnesses.
# The fast lane runs no matrix test.
if [ "$fast" = false ]; then
  "$VENV/bin/python" -m worker.cli harness install
fi

export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/benchloop}"
export CELERY_BROKER_URL="${TEST_CELERY_BROKER_URL:-redis://127.0.0.1:6379/15}"
export DEBUG=True
if [ "$fast" = true ]; then
  lane=(-m "not llm and not browser and not drill and not scale" --ignore-glob="worker/tests/test_matrix_*.py")
else
  lane=(--durations=25)  # the whole suite names its slowest tests, so their cost stays visible
fi
# --create-db: each worker's test database is made afresh (a few seconds of migrations), so rows
# a killed earlier run committed (a live server's, before its flush) cannot fail this one; stop
# 40's CI met a test_benchloop_gw1 holding such rows ("alice already exists" in 410 tests).
exec "$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" --create-db "${lane[@]}" "$@"
