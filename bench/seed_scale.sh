#!/usr/bin/env bash
# Time `seed_demo --runs N` on a fresh Postgres database (default N=100000).
# Usage: bash bench/seed_scale.sh [N]   (expects README command 2's venv and a local Postgres)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-100000}"
DB="${BENCH_DB:-benchloop_bench}"
# Quoted: a name with capitals is created as written (unquoted, Postgres folds it to lower case).
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS \"$DB\"" -c "CREATE DATABASE \"$DB\"" >/dev/null
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" DEBUG=True
.venv/bin/python manage.py migrate -v 0
/usr/bin/time -f "wall %e s, peak RSS %M KB" .venv/bin/python manage.py seed_demo --runs "$N"
.venv/bin/python manage.py shell -c "
from runs.models import Run, Stack, SuiteResult
print('rows:', Run.objects.count(), 'runs,', Stack.objects.count(), 'stacks,',
      SuiteResult.objects.count(), 'suite results')"
