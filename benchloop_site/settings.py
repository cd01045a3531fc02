"""BenchLoop settings: one module, driven by environment variables (see .env.example)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.http.request import split_domain_port, validate_host

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BENCHLOOP_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value in ("True", "true", "1"):
        return True
    if value in ("False", "false", "0"):
        return False
    raise ImproperlyConfigured(f"{name} must be True or False, not {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from exc


def env_secret(name: str, default: str = "") -> str:
    """Read NAME, or the contents of the file named by NAME_FILE (Docker secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, default)


def env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


DEBUG = env_bool("DEBUG", True)

SECRET_KEY = env_secret("SECRET_KEY")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")
if DEBUG:
    SECRET_KEY = SECRET_KEY or "django-insecure-benchloop-development-only"
    ALLOWED_HOSTS = ALLOWED_HOSTS or ["127.0.0.1", "localhost", "[::1]", "testserver"]
else:
    # Production must be configured on purpose; a guessed default would be a silent hole.
    if len(SECRET_KEY) < 50 or SECRET_KEY.startswith("django-insecure"):
        raise ImproperlyConfigured(
            "SECRET_KEY must be set to a random string of at least 50 characters when DEBUG is off "
            "(python -c 'import secrets; print(secrets.token_urlsafe(64))')."
        )
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must be set (comma-separated) when DEBUG is off.")

CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

# Keyed hashes of API keys, device codes and uploader addresses use their own secret, so a
# leaked SECRET_KEY alone does not let anyone test guesses against stored key hashes.
API_KEY_PEPPER = env_secret("API_KEY_PEPPER")
if not API_KEY_PEPPER:
    if not DEBUG:
        raise ImproperlyConfigured("API_KEY_PEPPER must be set when DEBUG is off.")
    API_KEY_PEPPER = "development-only-api-key-pepper"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "runs",
    "submissions",
    "leaderboard",
    "lab",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "core.security.ChunkedBodyMiddleware",
    "core.security.RejectNulMiddleware",
    "core.unavailable.ServiceUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.security.ContentSecurityPolicyMiddleware",
    # After the session and the user: it counts per account, else per client address.
    "core.pagelimits.PageRenderLimitMiddleware",
]

ROOT_URLCONF = "benchloop_site.urls"
WSGI_APPLICATION = "benchloop_site.wsgi.application"
ASGI_APPLICATION = "benchloop_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "leaderboard.context_processors.site",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'benchloop.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # The embedded default runs a web server and a worker against one file: WAL plus a busy
    # timeout keeps their concurrent writes from failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# Celery: an embedded filesystem broker by default, so a fresh machine needs no server.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
BROKER_DIR = Path(os.environ.get("BENCHLOOP_BROKER_DIR", VAR_DIR / "broker"))
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    # kombu's filesystem transport expects its folders to exist already.
    for _folder in ("queue", "control"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
else:
    # Longer than the longest job, or Redis redelivers a running job to a second worker.
    # Priorities 0-9 map to Redis sub-queues; Celery serves lower numbers first.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 4 * 3600),
        "queue_order_strategy": "priority",
        "priority_steps": list(range(10)),
    }
    # Several sites (or test runs) can share one Redis database: each keeps its queues under
    # its own prefix and never sees, consumes or purges another's.
    if os.environ.get("CELERY_BROKER_KEY_PREFIX"):
        CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = os.environ["CELERY_BROKER_KEY_PREFIX"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3 * 3600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3 * 3600 + 300)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker restart must not cancel a running benchmark: it goes on, its events go to Postgres,
# and a redelivered message finds the job claimed and does nothing. Celery 6 flips the default;
# worker/tests/test_redis_restart.py is the drill.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["submissions.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("THROTTLE_ANON", "120/minute"),
        "user": os.environ.get("THROTTLE_USER", "600/minute"),
        "upload": os.environ.get("THROTTLE_UPLOAD", "120/minute"),
        "legacy_submit": os.environ.get("THROTTLE_LEGACY_SUBMIT", "20/hour"),
        "device": os.environ.get("THROTTLE_DEVICE", "30/hour"),
        # `benchloop login` polls every 5 s for up to 10 minutes: one poll per 5 s sustained.
        "device_token": os.environ.get("THROTTLE_DEVICE_TOKEN", "720/hour"),
        # Per lab host key: events, heartbeats and prompt polls of a busy agent fit well inside.
        "lab_agent": os.environ.get("THROTTLE_LAB_AGENT", "6000/minute"),
    },
    # Proxies in front that append to X-Forwarded-For. DRF's default (None) trusts the whole
    # header, so a client could pick a fresh "address" per request and dodge every throttle.
    "NUM_PROXIES": env_int("NUM_PROXIES", 0),
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "BenchLoop API",
    "DESCRIPTION": "Upload benchmark runs and read the leaderboard of local LLM stacks.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Swagger UI's files are served from this site (whitenoise), never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No badge fetched from validator.swagger.io: the CSP allows images from this site only.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "REDOC_DIST": "SIDECAR",
    # Every operation documents its error responses in the one error shape.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.errors.document_errors",
    ],
}
# Two caches, both Redis when the broker is Redis (else files under var/):
# - "default" holds what can be recomputed: cached pages and fragments, share images. In
#   production it is its own Redis with a memory cap that evicts (docker-compose's `cache`).
# - "limits" holds what must not be evicted by a flood of cached pages: throttle counters and
#   sign-in lockouts. It defaults to the broker's Redis, which never evicts.


def _cache(url: str, folder: str) -> dict:
    if url.startswith("redis://"):
        # CACHE_KEY_PREFIX keeps sites (or test runs) that share one Redis database apart.
        return {
            "BACKEND": "core.cache.ReusingRedisCache",
            "LOCATION": url,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", ""),
        }
    return {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / folder),
    }


CACHES = {
    "default": _cache(os.environ.get("CACHE_URL") or CELERY_BROKER_URL, "cache"),
    "limits": _cache(os.environ.get("LIMITS_CACHE_URL") or CELERY_BROKER_URL, "limits"),
}
# Largest accepted upload body; a full bundle with every trial is well under 2 MiB.
BENCHLOOP_MAX_UPLOAD_BYTES = env_int("BENCHLOOP_MAX_UPLOAD_BYTES", 5 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = BENCHLOOP_MAX_UPLOAD_BYTES
LOGIN_URL = "accounts:login"
# Sign-in brute force: this many failures (per username, per client address) within the
# lockout period lock that username or address for the period (submissions/signin.py).
SIGNIN_MAX_FAILURES_PER_USERNAME = env_int("SIGNIN_MAX_FAILURES_PER_USERNAME", 5)
SIGNIN_MAX_FAILURES_PER_ADDRESS = env_int("SIGNIN_MAX_FAILURES_PER_ADDRESS", 20)
SIGNIN_LOCKOUT_SECONDS = env_int("SIGNIN_LOCKOUT_SECONDS", 900)
# How often `benchloop login` may poll for its key (RFC 8628 suggests 5 s); slow_down adds 5 s.
DEVICE_POLL_INTERVAL = env_int("DEVICE_POLL_INTERVAL", 5)
# HTML forms that write or send mail, and page renders, counted per account (per client
# address when signed out) with the same window counter as the API throttles
# (core/formlimits.py, core/pagelimits.py).
FORM_THROTTLE_RATES = {
    "signup": os.environ.get("THROTTLE_SIGNUP", "10/hour"),
    # Mail to one address, whoever asks: sign-up and password-reset mail cannot bomb anyone.
    "mail_to_address": os.environ.get("THROTTLE_MAIL_TO_ADDRESS", "3/hour"),
    "password_reset": os.environ.get("THROTTLE_PASSWORD_RESET", "10/hour"),
    "activate": os.environ.get("THROTTLE_ACTIVATE", "30/hour"),
    "device_approve": os.environ.get("THROTTLE_DEVICE_APPROVE", "20/hour"),
    "report": os.environ.get("THROTTLE_REPORT", "10/day"),
    "api_key": os.environ.get("THROTTLE_API_KEY", "20/hour"),
    "lab_job": os.environ.get("THROTTLE_LAB_JOB", "120/hour"),
    # Pages a view computes (core/pagelimits.py): a person reads far fewer; a copy from the
    # shared page cache does not count. Four a second, sustained for a minute, is a crawler.
    "page_render": os.environ.get("THROTTLE_PAGE_RENDER", "240/minute"),
}
# Distinct accounts whose open reports send an approved run back to the moderation queue;
# a report from a moderator or a trusted submitter does it alone (submissions.services).
BENCHLOOP_REPORTS_TO_HIDE_RUN = env_int("BENCHLOOP_REPORTS_TO_HIDE_RUN", 3)
LOGIN_REDIRECT_URL = "accounts:profile"
LOGOUT_REDIRECT_URL = "leaderboard:home"

EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "BenchLoop <noreply@localhost>")

# Security headers. The CSP allows no inline script anywhere; HTMX config lives in a meta tag.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "strict-origin-when-cross-origin"
X_FRAME_OPTIONS = "DENY"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'; object-src 'none'"
)
SESSION_COOKIE_HTTPONLY = True
# Database sessions that treat a cookie Django never issued (a NUL in it) as no session.
SESSION_ENGINE = "submissions.sessions"
# Whether visitors reach the site over HTTPS (directly or through a TLS-terminating proxy).
# Production must: on by default. The embedded default (scripts/serve.sh on localhost) serves
# plain HTTP and turns it off; a redirect to https:// there would reach nothing, HSTS would pin
# the browser to it, and Secure cookies would never come back, so nobody could sign in.
BENCHLOOP_HTTPS = env_bool("BENCHLOOP_HTTPS", True)
SECURE_SSL_REDIRECT = not DEBUG and BENCHLOOP_HTTPS and env_bool("SECURE_SSL_REDIRECT", True)
if not DEBUG and BENCHLOOP_HTTPS:
    # Behind a TLS-terminating proxy (docker-compose puts one in front), trust its header.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# The site's public address: scheme, host and port, nothing after. Links that leave the site
# (emails, webhooks, the upload answer that `benchloop submit` prints) are built on it.
SITE_URL = os.environ.get("SITE_URL", "").strip().rstrip("/")
if SITE_URL:
    _site = urlsplit(SITE_URL)
    if (
        _site.scheme not in ("http", "https")
        or not _site.hostname
        or _site.path
        or _site.query
        or _site.fragment
        or "@" in _site.netloc
    ):
        raise ImproperlyConfigured(
            f"SITE_URL must be http(s)://host[:port] with nothing after it, not {SITE_URL!r}."
        )
    if not validate_host(split_domain_port(_site.netloc)[0], ALLOWED_HOSTS):
        raise ImproperlyConfigured(f"SITE_URL's host {_site.hostname!r} is not in ALLOWED_HOSTS.")
    if not DEBUG and SECURE_SSL_REDIRECT and _site.scheme != "https":
        raise ImproperlyConfigured("SITE_URL must be https:// while SECURE_SSL_REDIRECT is on.")
elif DEBUG:
    SITE_URL = "http://127.0.0.1:8000"  # runserver's and scripts/serve.sh's default address
else:
    raise ImproperlyConfigured(
        "SITE_URL must be set when DEBUG is off: the public address, e.g. https://bench.example.org"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        # The reaper runs every 30 s: Celery's lines about it are debug unless it acted.
        "quiet_reaper": {"()": "lab.quietlogs.QuietReaper"},
        # The job, run or upload a line is about (worker.rules.logcontext) goes on every line.
        "log_context": {"()": "worker.rules.logcontext.ContextFilter"},
    },
    # LOG_FORMAT=json: one JSON object a line, for a log collector; text puts key=value after
    # the message.
    "formatters": {
        "lines": {
            "()": "worker.rules.logcontext.formatter",
            "kind": os.environ.get("LOG_FORMAT", "text"),
        }
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["log_context"],
            "formatter": "lines",
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        **{
            name: {"filters": ["quiet_reaper"]}
            for name in ("celery.beat", "celery.worker.strategy", "celery.app.trace")
        },
    },
}

# The "demo data" banner, for a site that holds synthetic runs (scripts/serve.sh sets it when
# asked to seed them), so nobody mistakes them for measurements.
BENCHLOOP_DEMO_BANNER = env_bool("BENCHLOOP_DEMO_BANNER", False)

# Where seed_real and seed_demo find the earlier product's real data files (the repo's sibling
# shared/ folder), and seed_real the community measurements (runs/methods.py names the sources).
BENCHLOOP_FIXTURES_DIR = Path(
    os.environ.get("BENCHLOOP_FIXTURES_DIR", BASE_DIR.parent / "shared" / "fixtures" / "benchloop")
)
BENCHLOOP_REAL_DATA_DIR = Path(
    os.environ.get("BENCHLOOP_REAL_DATA_DIR", BASE_DIR.parent / "shared" / "data" / "real")
)

# Lab jobs: how often a running job reports in, and after how much silence it is presumed lost.
BENCHLOOP_JOB_HEARTBEAT_SECONDS = env_int("BENCHLOOP_JOB_HEARTBEAT_SECONDS", 5)
BENCHLOOP_JOB_STALE_SECONDS = env_int("BENCHLOOP_JOB_STALE_SECONDS", 60)
# Webhooks go only to public addresses in production (no SSRF into the lab's own network);
# development and the tests post to receivers on loopback.
WEBHOOK_ALLOW_PRIVATE_ADDRESSES = env_bool("BENCHLOOP_WEBHOOK_ALLOW_PRIVATE", DEBUG)

CELERY_BEAT_SCHEDULE = {
    "every-hour-refresh-stale-stack-stats": {
        "task": "runs.refresh_stale_stack_stats",
        "schedule": 3600.0,
    },
    "every-30-seconds-reap-stale-jobs": {
        "task": "worker.reap_stale_jobs",
        "schedule": 30.0,
    },
    # A page asks for it after a publish; this catches a request whose message was lost.
    "every-minute-calibrate-estimates": {
        "task": "leaderboard.calibrate_estimates",
        "schedule": 60.0,
    },
}

# Load benchmarks only (bench/load_read.py): routes /bench/baseline, a constant answer through
# the whole middleware stack, against which page throughput is compared. Off in production.
BENCHLOOP_BENCH_BASELINE = env_bool("BENCHLOOP_BENCH_BASELINE", False)
