"""Real installs of the site for end-to-end tests, each as its own processes on a free port.

- `embedded`: README command 1 itself (`scripts/serve.sh`): SQLite and the filesystem broker
  under a private var folder, the Celery worker it starts, gunicorn.
- `postgres`: the production topology minus docker: gunicorn and a Celery worker against the
  test's Postgres database, and a Redis server of the test's own (the suite's shared Redis has
  its queue purged and its throttle counters shared by every test process).

Both run with production settings (DEBUG off) over plain HTTP on 127.0.0.1, and neither
inherits a setting from the test process: every variable in .env.example is dropped first.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lab.tests.lab import wait_for
from worker.engine.testing.xllama_launcher import free_port
from worker.managed import stop_process_group

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent
__all__ = ["free_port", "wait_for"]  # for the tests that use these installs


def get(url: str, **headers: str) -> tuple[int, str]:
    """The status and body of GET url; status 0 when nothing answers."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def clean_environment(**settings: str) -> dict[str, str]:
    """This process's environment without any BenchLoop setting (.env.example lists them all)
    or pytest-django's, plus `settings`."""
    names = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (REPO / ".env.example").read_text(), re.M))
    names |= {f"{name}_FILE" for name in names} | {"DJANGO_SETTINGS_MODULE"}
    names |= {name for name in os.environ if name.startswith("DJANGO_SUPERUSER_")}
    env = {k: v for k, v in os.environ.items() if k not in names}
    # But the run's cache prefix (conftest): the site's keys are the run's, removed at its end.
    if "CACHE_KEY_PREFIX" in os.environ:
        env["CACHE_KEY_PREFIX"] = os.environ["CACHE_KEY_PREFIX"]
    return {**env, **settings}


@dataclass
class Install:
    """A running site: its URL, the environment its own commands run with, and its logs."""

    name: str
    url: str
    env: dict[str, str]
    logs: list[Path] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def create_admin(self, username: str, password: str) -> None:
        """A superuser, made as README command 1 says: serve.sh prints the createsuperuser
        command to run (run here with --noinput and Django's DJANGO_SUPERUSER_* variables,
        having no terminal); elsewhere manage.py createsuperuser against the install's
        database, as `docker compose exec web` would run it."""
        command = [sys.executable, "manage.py", "createsuperuser"]
        env = dict(self.env)
        if self.name == "embedded":
            printed = re.search(r"create an admin \(once\).*\n\s+(.+)", self.log_text())
            assert printed, "serve.sh did not say how to create an admin"
            *assignments, python, manage, subcommand = shlex.split(printed.group(1))
            env = clean_environment(**dict(a.split("=", 1) for a in assignments))
            command = [python, manage, subcommand]
        env |= {
            "DJANGO_SUPERUSER_USERNAME": username,
            "DJANGO_SUPERUSER_PASSWORD": password,
            "DJANGO_SUPERUSER_EMAIL": f"{username}@example.org",
        }
        done = subprocess.run(
            [*command, "--noinput"], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "Superuser created successfully." in done.stdout

    def wait_for_task(self, name: str, timeout: float = 60) -> None:
        """Until this install's Celery worker logs that it ran task `name` to success."""
        done = re.compile(rf"Task {re.escape(name)}\[[^\]]+\] succeeded")
        wait_for(lambda: done.search(self.log_text()), timeout, f"the worker to run {name}")

    def log_text(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in self.logs if path.exists())

    def wait_until_healthy(self, timeout: float = 180) -> None:
        def healthy() -> bool:
            exited = [p.args for p in self.processes if p.poll() is not None]
            assert not exited, f"{exited} exited:\n{self.log_text()[-4000:]}"
            return get(f"{self.url}/healthz")[0] == 200

        try:
            wait_for(healthy, timeout, f"the {self.name} site")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.log_text()[-4000:]}") from None


@contextmanager
def _process(command: list[str], *, env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """A process group (killed whole on exit: serve.sh's worker and gunicorn included)."""
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            stop_process_group(process, 30)


@contextmanager
def embedded_install(var: Path, fixtures_dir: Path, **settings: str) -> Iterator[Install]:
    """`bash scripts/serve.sh` with its var folder at `var`, as a user starts it."""
    port = free_port()
    env = clean_environment(
        BENCHLOOP_VENV=str(VENV),
        PORT=str(port),
        BENCHLOOP_VAR_DIR=str(var),
        BENCHLOOP_FIXTURES_DIR=str(fixtures_dir),
        COLUMNS="300",
        **settings,
    )
    log = var.parent / f"serve-{port}.log"
    install = Install("embedded", f"http://127.0.0.1:{port}", env, [log])
    with _process(["bash", str(REPO / "scripts/serve.sh")], env=env, log=log) as serve:
        install.processes.append(serve)
        yield install


def database_url(settings_dict: dict) -> str:
    """A postgres:// URL for Django's connection settings (the test database's, in tests)."""
    user = settings_dict["USER"] or "postgres"
    password = f":{settings_dict['PASSWORD']}" if settings_dict["PASSWORD"] else ""
    host = settings_dict["HOST"] or "127.0.0.1"
    port = settings_dict["PORT"] or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"


def collect_static(static_root: Path) -> Path:
    """collectstatic with production's manifest storage into `static_root` (once per folder)."""
    if not (static_root / "staticfiles.json").exists():
        env = clean_environment(
            DEBUG="False",
            SECRET_KEY=secrets.token_urlsafe(64),
            API_KEY_PEPPER=secrets.token_urlsafe(32),
            ALLOWED_HOSTS="127.0.0.1",
            BENCHLOOP_HTTPS="False",
            SITE_URL="http://127.0.0.1",
            STATIC_ROOT=str(static_root),
            BENCHLOOP_VAR_DIR=str(static_root.parent / "collect-var"),
        )
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            cwd=REPO,
            env=env,
            check=True,
            timeout=300,
        )
    return static_root


@contextmanager
def postgres_install(folder: Path, database: str, static_root: Path) -> Iterator[Install]:
    """gunicorn and a Celery worker on Postgres `database` and a private Redis server."""
    redis_port, port = free_port(), free_port()
    env = clean_environment(
        DATABASE_URL=database,
        CELERY_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        BENCHLOOP_HTTPS="False",
        SITE_URL=f"http://127.0.0.1:{port}",
        STATIC_ROOT=str(static_root),
        BENCHLOOP_VAR_DIR=str(folder / "var"),
        EMAIL_BACKEND="django.core.mail.backends.console.EmailBackend",
    )
    logs = [folder / name for name in ("redis.log", "gunicorn.log", "worker.log")]
    install = Install("postgres", f"http://127.0.0.1:{port}", env, logs)
    redis_server = shutil.which("redis-server") or "/usr/bin/redis-server"
    with ExitStack() as stack:
        redis = stack.enter_context(
            _process(
                [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1"]
                + ["--save", "", "--appendonly", "no", "--dir", str(folder)],
                env=env,
                log=logs[0],
            )
        )
        install.processes.append(redis)
        migrated = install.manage("migrate", "--noinput", "-v", "0")  # as the entrypoint does
        assert migrated.returncode == 0, migrated.stderr
        web = stack.enter_context(
            _process(
                [sys.executable, "-m", "gunicorn", "benchloop_site.wsgi:application"]
                + ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--no-control-socket"],
                env=env,
                log=logs[1],
            )
        )
        worker = stack.enter_context(
            _process(
                [sys.executable, "-m", "celery", "-A", "benchloop_site", "worker"]
                + ["--loglevel", "INFO", "--concurrency", "1", "--without-mingle"],
                env=env,
                log=logs[2],
            )
        )
        install.processes += [web, worker]
        yield install


CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
ACTIVATION_LINK = r"{}/account/activate/[^/\s]+/[^/\s]+/"


class Browser:
    """A visitor's browser over HTTP: it keeps cookies and posts a page's form with the CSRF
    token the page carries, as a browser without JavaScript does."""

    def __init__(self, base_url: str) -> None:
        import httpx

        self.base_url = base_url
        # No idle connections: a server that keeps them alive (waitress does) would leave an
        # open socket behind each browser, and unclosed sockets fail the suite.
        self.client = httpx.Client(
            base_url=base_url,
            follow_redirects=True,
            timeout=30,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def get(self, path: str):
        return self.client.get(path)

    def submit(self, page: str, data: dict, action: str | None = None):
        """Open `page`, then post `data` with its CSRF token to `action` (default: the page)."""
        shown = self.get(page)
        assert shown.status_code == 200, (page, shown.status_code, shown.text[:500])
        token = CSRF_FIELD.search(shown.text)
        assert token, f"no form with a CSRF token on {page}"
        return self.client.post(
            action or page,
            data={**data, "csrfmiddlewaretoken": token.group(1)},
            headers={"Referer": self.base_url + page},
        )

    def sign_up(self, username: str, email: str, password: str, mailbox: Callable[[], str]) -> None:
        """Sign up through the form and end signed in. Where the site mails an activation
        link first, it is read from `mailbox()` (the install's log: its mail goes to the
        console) and opened, and the account activated with the page's button."""
        answer = self.submit(
            "/account/signup/",
            {"username": username, "email": email, "password1": password, "password2": password},
        )
        if answer.url.path != "/account/":
            assert answer.status_code == 200, (answer.status_code, answer.text[-2000:])
            link = ACTIVATION_LINK.format(re.escape(self.base_url))
            found = wait_for(lambda: re.findall(link, mailbox()), 30, "the activation mail")
            answer = self.submit(found[-1][len(self.base_url) :], {})
        assert answer.url.path == "/account/", (answer.status_code, answer.text[-2000:])

    def sign_in(self, username: str, password: str) -> None:
        answer = self.submit("/account/login/", {"username": username, "password": password})
        assert answer.url.path == "/account/", (answer.status_code, answer.text[-2000:])
