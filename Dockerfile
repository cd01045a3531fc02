FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    BENCHLOOP_VAR_DIR=/app/var STATIC_ROOT=/app/staticfiles
WORKDIR /app
# bubblewrap cages model-written code in the coding suites (docs/sandbox.md); the container needs
# user namespaces for it (see that page), and without them those tasks are refused, not run.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY benchloop_site ./benchloop_site
COPY core ./core
COPY lab ./lab
COPY leaderboard ./leaderboard
COPY runs ./runs
COPY submissions ./submissions
COPY worker ./worker
RUN pip install ".[site]"
COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY docker/entrypoint.sh /usr/local/bin/benchloop-entrypoint
RUN useradd --create-home --uid 10001 benchloop && mkdir -p /app/var /app/staticfiles \
    && chown -R benchloop /app/var /app/staticfiles
USER benchloop
EXPOSE 8000
ENTRYPOINT ["benchloop-entrypoint"]
CMD ["gunicorn", "benchloop_site.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
