"""docker-compose's topology without a Docker engine: the `web` service's command and the
`proxy` service's nginx with docker/nginx.conf.template, on loopback, with the environment the
compose file gives them. test_docker_compose.py and bench/slowloris.py start them from here.

What differs from the containers, and only that: ports are free loopback ports instead of
8000/80/443/8081, Postgres and Redis are this machine's instead of the `postgres`, `redis` and
`cache` services, certificates are a throwaway self-signed pair, and nginx's main file (which
the image brings) is a small one written here.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from worker.engine.testing.xllama_launcher import free_port
from worker.managed import stop_process_group

REPO = Path(__file__).resolve().parents[2]
SERVICES = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
PUBLIC_NAME = "bench.example.org"
# Compose's own ports, replaced by free ones here.
WEB_PORT, HTTP_PORT, HTTPS_PORT = 8000, 80, 443


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """${VAR}, ${VAR:-default} and ${VAR:?message} as docker compose fills them from .env."""

    def one(match: re.Match) -> str:
        name, operator, rest = match.group(1), match.group(2), match.group(3) or ""
        given = env.get(name, "")
        if operator == ":?" and not given:
            raise ValueError(f"compose would refuse to start: {rest}")
        return given or (rest if operator == ":-" else "")

    # "$$" is compose's escape for a literal "$" (left for the container's shell).
    return re.sub(r"(?<!\$)\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, str(value)).replace("$$", "$")


def dot_env(**values: str) -> dict[str, str]:
    """What an operator's .env holds for production (secrets are throwaway)."""
    return {
        "SITE_DOMAIN": PUBLIC_NAME,
        "SECRET_KEY": secrets.token_urlsafe(64),
        "API_KEY_PEPPER": secrets.token_urlsafe(32),
        "TLS_CERTIFICATE_DIR": "/etc/letsencrypt/live/" + PUBLIC_NAME,
        **values,
    }


def service_env(name: str, dotenv: Mapping[str, str], **local: str) -> dict[str, str]:
    """The service's environment as compose computes it, then `local` replacements (this
    machine's Postgres and Redis instead of the compose services' host names)."""
    env = {key: interpolate(value, dotenv) for key, value in SERVICES[name]["environment"].items()}
    return {**env, **local}


def process_env(service: dict[str, str]) -> dict[str, str]:
    """An environment for a process here: the service's variables over a clean PATH and HOME,
    without this test process's own settings (DEBUG, DATABASE_URL, …)."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "CELERY_BROKER_KEY_PREFIX",
        # The run's cache prefix (conftest): the site's keys are the run's, cleaned at its end.
        "CACHE_KEY_PREFIX",
    )
    return {**{k: v for k, v in os.environ.items() if k in keep}, **service}


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """A process group started with `command`, stopped (and its children) afterwards."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield proc
    finally:
        stop_process_group(proc, 20)


def wait_for(url: str, proc: subprocess.Popen, log: Path, *, host: str, verify=False) -> None:
    """Until `url` answers 200 with this Host header (or the process dies: then its log)."""
    deadline = time.monotonic() + 90
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode}):\n{_tail(log)}")
        try:
            response = get(url, host=host, verify=verify)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{url} never answered 200 (last: {last}):\n{_tail(log)}")


def get(url: str, *, host: str = PUBLIC_NAME, verify=False, **kwargs) -> httpx.Response:
    """GET with this Host header, and over TLS this server name (not the URL's address)."""
    extensions = {"sni_hostname": host} if url.startswith("https:") else {}
    headers = {"Host": host, **kwargs.pop("headers", {})}
    with httpx.Client(verify=verify, timeout=kwargs.pop("timeout", 5)) as client:
        return client.get(url, headers=headers, extensions=extensions, **kwargs)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else ""


def collect_static(env: dict[str, str]) -> None:
    """collectstatic into env's STATIC_ROOT: production's manifest storage serves no page
    without it."""
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )


def web_command(port: int) -> list[str]:
    """The `web` service's command, listening on a loopback port instead of 0.0.0.0:8000."""
    command = list(SERVICES["web"]["command"])
    command[command.index("--bind") + 1] = f"127.0.0.1:{port}"
    command[0] = str(Path(sys.executable).parent / command[0])
    return command


# This process's collected static files (collectstatic was most of a `web` start's time).
_STATIC: dict[str, Path] = {}


def _new_static_root() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="benchloop-compose-static-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


@dataclass
class Web:
    port: int
    env: dict[str, str]
    log: Path


@contextlib.contextmanager
def web(work: Path, database_url: str, broker_url: str, **extra: str) -> Iterator[Web]:
    """The `web` service: its command with its environment, on this machine's services."""
    dotenv = dot_env()
    static_root = _STATIC.get("root")
    env = process_env(
        service_env(
            "web",
            dotenv,
            DATABASE_URL=database_url,
            CELERY_BROKER_URL=broker_url,
            CACHE_URL=broker_url,
            STATIC_ROOT=str(static_root or _new_static_root()),
            LOG_LEVEL="WARNING",
            **extra,
        )
    )
    if static_root is None:
        # What docker/entrypoint.sh does first (the test database is migrated already). The
        # files are the same for every start, so this process collects them once.
        collect_static(env)
        _STATIC["root"] = Path(env["STATIC_ROOT"])
    port = free_port()
    log = work / "web.log"
    with running(web_command(port), env, log) as proc:
        wait_for(f"http://127.0.0.1:{port}/healthz", proc, log, host=PUBLIC_NAME)
        yield Web(port=port, env=env, log=log)


def self_signed_certificate(folder: Path, name: str = PUBLIC_NAME) -> Path:
    """fullchain.pem and privkey.pem for `name` in `folder`, as certbot leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
        + ["-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}"]
        + ["-keyout", str(folder / "privkey.pem"), "-out", str(folder / "fullchain.pem")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return folder / "fullchain.pem"


@dataclass
class Proxy:
    https_port: int
    http_port: int
    health_port: int
    certificate: Path  # self-signed: it is its own trust anchor
    env: dict[str, str]
    log: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"

    def ssl_context(self):
        """Trusts this proxy's certificate only, and checks it names the public host."""
        import ssl

        return ssl.create_default_context(cafile=str(self.certificate))


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")
    if not found:
        raise RuntimeError("nginx is not installed (scripts/test.sh installs Debian's nginx-light)")
    return found


def render_template(template: Path, env: Mapping[str, str]) -> str:
    """What the nginx image's entrypoint writes: envsubst of the variables that are set."""
    names = " ".join(f"${{{name}}}" for name in env)
    done = subprocess.run(
        ["envsubst", names],
        input=template.read_text(),
        capture_output=True,
        text=True,
        check=True,
        env=dict(env),
    )
    return done.stdout


@contextlib.contextmanager
def proxy(work: Path, upstream_port: int) -> Iterator[Proxy]:
    """The `proxy` service: nginx with the mounted template, in front of `upstream_port`."""
    folder = work / "nginx"
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (folder / "temp" / sub).mkdir(parents=True, exist_ok=True)
    certificate = self_signed_certificate(folder / "certs")
    ports = {"HTTPS_PORT": free_port(), "HTTP_PORT": free_port(), "PROXY_HEALTH_PORT": free_port()}
    service = service_env("proxy", dot_env(), UPSTREAM=f"127.0.0.1:{upstream_port}")
    service.update({name: str(port) for name, port in ports.items()})
    # The certificate folder is mounted at /etc/nginx/certs in the container.
    for name in ("TLS_CERTIFICATE", "TLS_CERTIFICATE_KEY"):
        service[name] = service[name].replace("/etc/nginx/certs", str(certificate.parent))
    env = process_env(service)
    (folder / "default.conf").write_text(
        render_template(REPO / "docker" / "nginx.conf.template", env)
    )
    temp = folder / "temp"
    # The image's own nginx.conf, as far as it matters: one worker per core, 1,024 connections
    # each, the template's result included in the http block.
    main = f"""
{"user root;" if os.geteuid() == 0 else ""}
worker_processes auto;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {folder}/default.conf;
}}
"""
    (folder / "nginx.conf").write_text(main)
    log = folder / "error.log"
    command = [nginx_binary(), "-c", str(folder / "nginx.conf"), "-g", "daemon off;"]
    with running(command, env, work / "nginx.out") as proc:
        result = Proxy(
            https_port=ports["HTTPS_PORT"],
            http_port=ports["HTTP_PORT"],
            health_port=ports["PROXY_HEALTH_PORT"],
            certificate=certificate,
            env=env,
            log=log,
        )
        verify = result.ssl_context()
        wait_for(f"{result.url}/healthz", proc, log, host=PUBLIC_NAME, verify=verify)
        yield result
