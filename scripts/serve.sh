#!/usr/bin/env bash
# README command 1: install, migrate, seed the real data, then serve the site with a Celery worker
# on the embedded defaults (SQLite under var/, filesystem broker): no Postgres or Redis needed.
# It serves as production does (DEBUG off, secrets of its own, collected static files, the
# site's error pages), over plain HTTP on the address it binds.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
ensure_venv "run"
# The database, the broker's messages, caches and secrets are this user's alone.
umask 077
PORT="${PORT:-8000}"
HOST="${HOST:-127.0.0.1}"
export PATH="$VENV/bin:$PATH"
VAR_DIR="${BENCHLOOP_VAR_DIR:-$ROOT/var}"
mkdir -p "$VAR_DIR"

# A secret made on the first start and kept (mode 600) under var/, so sessions and API keys
# survive a restart. settings.py reads NAME_FILE (env_secret); a value set by the caller wins.
keep_secret() {
  local name="$1" file="$VAR_DIR/$2" file_variable="${1}_FILE"
  if [ -n "${!name:-}" ] || [ -n "${!file_variable:-}" ]; then
    return 0
  fi
  if [ ! -s "$file" ]; then
    (umask 077 && python -c 'import secrets; print(secrets.token_urlsafe(64))' > "$file.tmp")
    mv "$file.tmp" "$file"
  fi
  chmod 600 "$file"
  export "${name}_FILE=$file"
}
keep_secret SECRET_KEY secret_key
keep_secret API_KEY_PEPPER api_key_pepper

export DEBUG="${DEBUG:-False}"
# Plain HTTP on this machine: no redirect to https://, no HSTS, cookies without the Secure flag
# (settings.BENCHLOOP_HTTPS). A public site runs behind TLS with the default, True.
export BENCHLOOP_HTTPS="${BENCHLOOP_HTTPS:-False}"
# The "demo data" banner shows where synthetic runs were asked for, and only there.
if [ "${BENCHLOOP_SYNTHETIC_DEMO:-0}" = "1" ]; then
  export BENCHLOOP_DEMO_BANNER="${BENCHLOOP_DEMO_BANNER:-True}"
fi
# No mail server here: notifications go to this terminal.
export EMAIL_BACKEND="${EMAIL_BACKEND:-django.core.mail.backends.console.EmailBackend}"
if [ -z "${ALLOWED_HOSTS:-}" ]; then
  case "$HOST" in
    127.0.0.1 | localhost | ::1 | "[::1]") ALLOWED_HOSTS="127.0.0.1,localhost,[::1]" ;;
    0.0.0.0 | :: | "[::]")
      # Every name and address this machine answers to.
      ALLOWED_HOSTS="127.0.0.1,localhost,[::1],$(hostname)"
      for address in $(hostname -I 2>/dev/null); do
        case "$address" in *:*) address="[$address]" ;; esac
        ALLOWED_HOSTS="$ALLOWED_HOSTS,$address"
      done
      ;;
    *:*) ALLOWED_HOSTS="[$HOST],127.0.0.1,localhost" ;;
    *) ALLOWED_HOSTS="$HOST,127.0.0.1,localhost" ;;
  esac
fi
export ALLOWED_HOSTS
# The address to show and to build links on: the one bound, or this machine's first address.
SHOWN_HOST="$HOST"
case "$HOST" in 0.0.0.0 | :: | "[::]") SHOWN_HOST="$(hostname -I 2>/dev/null | awk '{print $1}')" ;; esac
SHOWN_HOST="${SHOWN_HOST:-127.0.0.1}"
case "$SHOWN_HOST" in \[*) ;; *:*) SHOWN_HOST="[$SHOWN_HOST]" ;; esac
URL="http://$SHOWN_HOST:$PORT"
# The address that links leaving the site (mail, the upload answer the CLI prints) are built on.
export SITE_URL="${SITE_URL:-$URL}"
# The embedded broker with its host named: kombu warns "No hostname was supplied" without one.
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-$EMBEDDED_BROKER}"

python manage.py migrate --noinput -v 0
python manage.py collectstatic --noinput -v 0
# Real measurements only: community data (imported, marked so) and the earlier product's runs.
# Synthetic demo stacks come only when asked for (BENCHLOOP_SYNTHETIC_DEMO=1).
python manage.py seed_real
if [ "${BENCHLOOP_SYNTHETIC_DEMO:-0}" = "1" ]; then python manage.py seed_demo; fi

# An admin (a superuser: every permission, the moderation queue included) from Django's own
# variables, created once: DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_PASSWORD and optionally
# DJANGO_SUPERUSER_EMAIL (where moderation notices would go; default NAME@localhost).
if [ -n "${DJANGO_SUPERUSER_USERNAME:-}" ]; then
  export DJANGO_SUPERUSER_EMAIL="${DJANGO_SUPERUSER_EMAIL:-$DJANGO_SUPERUSER_USERNAME@localhost}"
  if created="$(python manage.py createsuperuser --noinput 2>&1)"; then
    echo "==> created the admin $DJANGO_SUPERUSER_USERNAME"
  elif [[ "$created" == *"already taken"* ]]; then
    echo "==> the admin $DJANGO_SUPERUSER_USERNAME exists"
  else
    echo "$created" >&2
    exit 1
  fi
fi

celery -A benchloop_site worker --beat --loglevel INFO --concurrency 1 \
  --schedule "$VAR_DIR/celerybeat-schedule" &
WORKER_PID=$!
trap 'kill "$WORKER_PID" 2>/dev/null; wait "$WORKER_PID" 2>/dev/null' EXIT INT TERM

ADMIN_ENV=""
[ -n "${BENCHLOOP_VAR_DIR:-}" ] && ADMIN_ENV="BENCHLOOP_VAR_DIR=$BENCHLOOP_VAR_DIR "
echo "==> BenchLoop is starting at $URL/  (health: $URL/healthz; Ctrl-C stops)"
admins="$(python manage.py shell -v 0 -c 'from django.contrib.auth.models import User; print(User.objects.filter(is_superuser=True, is_active=True).count())')"
if [ "$admins" = "0" ]; then
  cat <<EOF
==> To moderate uploads, create an admin (once) in another terminal:
      ${ADMIN_ENV}$VENV/bin/python $ROOT/manage.py createsuperuser
    then sign in at $URL/account/login/ and open $URL/moderation/
    (or start with DJANGO_SUPERUSER_USERNAME and DJANGO_SUPERUSER_PASSWORD set).
EOF
else
  echo "==> Admins sign in at $URL/account/login/; the moderation queue is $URL/moderation/"
fi
# waitress reads whole requests before a thread sees them: slow clients cannot take the site
# down (benchloop_site/server.py; the drill is bench/slowloris.py).
python -m benchloop_site.server --listen "$HOST:$PORT"
