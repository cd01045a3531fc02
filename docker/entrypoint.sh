#!/bin/sh
# Web containers migrate and collect static files before serving; workers start straight away.
set -e
if [ "${RUN_MIGRATIONS:-0}" = "1" ]; then
  python manage.py migrate --noinput
  python manage.py collectstatic --noinput -v 0
fi
exec "$@"
