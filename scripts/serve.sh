#!/usr/bin/env bash
# README command 1: install, migrate, seed demo data, then serve the site with a Celery worker
# on the embedded defaults (SQLite under var/, filesystem broker): no Postgres or Redis needed.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
ensure_venv "run"
PORT="${PORT:-8000}"
HOST="${HOST:-127.0.0.1}"
export PATH="$VENV/bin:$PATH"

python manage.py migrate --noinput -v 0
python manage.py seed_demo

celery -A benchloop_site worker --beat --loglevel INFO --concurrency 1 \
  --schedule "${BENCHLOOP_VAR_DIR:-$ROOT/var}/celerybeat-schedule" &
WORKER_PID=$!
trap 'kill "$WORKER_PID" 2>/dev/null; wait "$WORKER_PID" 2>/dev/null' EXIT INT TERM

echo "==> BenchLoop is starting at http://$HOST:$PORT/  (health: http://$HOST:$PORT/healthz; Ctrl-C stops)"
# waitress reads whole requests before a thread sees them: slow clients cannot take the site
# down (benchloop_site/server.py; the drill is bench/slowloris.py).
python -m benchloop_site.server --listen "$HOST:$PORT"
