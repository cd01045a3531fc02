"""An upload's answer never denies a write that committed, and "nothing was saved" is only said
when it is true.

The faults are real: the upload's own Postgres backend is terminated (pg_terminate_backend)
right after its commit or inside its transaction, the answer to its COMMIT is lost on the way
back (a TCP relay between Django and Postgres drops it), and a drill terminates every backend
of the test database again and again while clients upload. Only the test database's backends
are touched, never the shared cluster.
"""

from __future__ import annotations

import copy
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import httpx
import psycopg
import pytest
from django.db import connection, transaction
from django.db.models.signals import post_save
from django.test import Client

from submissions.models import Submission, UploadAttempt
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db(transaction=True)

NOTHING_SAVED = "nothing was saved"


def _dsn(**override) -> str:
    db = {**connection.settings_dict, **override}
    return (
        f"host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432} dbname={db['NAME']} "
        f"user={db['USER']} password={db['PASSWORD'] or ''}"
    )


def _terminate(pids: list[int]) -> None:
    """Terminate these backends of the test database and wait until they are gone."""
    with psycopg.connect(_dsn(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
        for _ in range(200):
            alive = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
            ).fetchone()[0]
            if not alive:
                return
            time.sleep(0.01)
    raise AssertionError(f"backends {pids} outlived pg_terminate_backend")


def _kill_own_backend() -> None:
    _terminate([connection.connection.info.backend_pid])


@pytest.fixture
def on_create() -> Iterator[Callable[[type, Callable[[], None]], None]]:
    """on_create(Model, action): run action when a row of Model is inserted (once)."""
    connected = []

    def arm(model: type, action: Callable[[], None]) -> None:
        def handler(sender, created: bool, **kwargs) -> None:
            if created and not fired:
                fired.append(True)
                action()

        fired: list[bool] = []
        post_save.connect(handler, sender=model, weak=False)
        connected.append((handler, model))

    yield arm
    for handler, model in connected:
        post_save.disconnect(handler, sender=model)
    connection.close()  # a terminated connection must not reach the test's teardown


def _upload(client: Client, envelope: dict, key: str, run_id: str):
    body = copy.deepcopy(envelope)
    body["run"]["source_run_id"] = run_id
    return post_json(client, "/api/v1/runs", body, key)


def test_a_connection_lost_just_after_the_commit_still_answers_201(
    alice, alice_key, envelope, on_create
) -> None:
    """The answer is built before the commit: the database going away afterwards (here the
    backend is terminated in an on_commit hook) cannot turn a stored run into a 503."""
    on_create(Submission, lambda: transaction.on_commit(_kill_own_backend))
    response = _upload(Client(raise_request_exception=False), envelope, alice_key, "after-commit")
    connection.close()
    assert response.status_code == 201, response.content
    stored = Submission.objects.get()
    assert response.json()["id"] == stored.run_id
    assert response.json()["attempts"] == 1


def test_a_connection_lost_inside_the_transaction_says_nothing_was_saved_and_saves_nothing(
    alice, alice_key, envelope, on_create
) -> None:
    on_create(UploadAttempt, _kill_own_backend)  # the last row the upload writes
    response = _upload(Client(raise_request_exception=False), envelope, alice_key, "inside")
    connection.close()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "database_unavailable"
    assert NOTHING_SAVED in response.json()["error"]["message"]
    assert response["Retry-After"] == "5"
    assert not Submission.objects.exists() and not UploadAttempt.objects.exists()


class CommitEater:
    """A TCP relay in front of Postgres that, once armed, passes the next COMMIT on to the
    server, waits for the server's answer and then closes the client's side without it: the
    transaction is committed and the client cannot know."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.armed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            committed = threading.Event()
            threading.Thread(target=self._up, args=(client, server, committed), daemon=True).start()
            threading.Thread(
                target=self._down, args=(server, client, committed), daemon=True
            ).start()

    def _up(self, client: socket.socket, server: socket.socket, committed: threading.Event) -> None:
        with client, server:
            while data := _recv(client):
                # The statement is NUL-terminated in both a simple query and a Parse message.
                if self.armed.is_set() and b"COMMIT\x00" in data:
                    self.armed.clear()
                    committed.set()
                server.sendall(data)

    def _down(self, server: socket.socket, client: socket.socket, committed: threading.Event):
        while data := _recv(server):
            if committed.is_set():
                # The server has answered the COMMIT: the client never hears it.
                client.shutdown(socket.SHUT_RDWR)
                return
            client.sendall(data)

    def close(self) -> None:
        self.listener.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


@pytest.fixture
def commit_eater(settings) -> Iterator[CommitEater]:
    relay = CommitEater(int(connection.settings_dict["PORT"] or 5432))
    previous = connection.settings_dict["HOST"], connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["HOST"], connection.settings_dict["PORT"] = "127.0.0.1", relay.port
    try:
        yield relay
    finally:
        connection.close()
        connection.settings_dict["HOST"], connection.settings_dict["PORT"] = previous
        relay.close()


def test_a_commit_whose_answer_is_lost_is_found_and_answered_201(
    alice, alice_key, envelope, on_create, commit_eater
) -> None:
    """The commit landed but its answer never came back: the upload asks a new connection,
    finds its run, and answers 201 instead of denying it."""
    on_create(Submission, commit_eater.armed.set)
    response = _upload(Client(raise_request_exception=False), envelope, alice_key, "lost-ack")
    assert not commit_eater.armed.is_set()  # the COMMIT went through the relay
    assert response.status_code == 201, response.content
    assert Submission.objects.get().run_id == response.json()["id"]


@pytest.mark.drill
def test_in_a_drill_every_answer_agrees_with_what_is_stored(
    live_server, alice, alice_key, envelope
) -> None:
    """Four clients upload while every backend of the test database is terminated, again and
    again at random moments: each answer must match the database afterwards."""
    stop = threading.Event()
    answers: list[tuple[str, int, dict]] = []
    kills = []

    def killer() -> None:
        with psycopg.connect(_dsn(), autocommit=True) as admin:
            while not stop.is_set():
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchall()
                kills.append(len(rows))
                # Often enough to strike uploads at every step, rarely enough to let some finish.
                time.sleep(random.uniform(0.05, 0.3))

    def uploader(number: int) -> None:
        with httpx.Client(base_url=live_server.url, timeout=30) as http:
            index = 0
            while not stop.is_set():
                index += 1
                run_id = f"drill-{number}-{index}"
                body = copy.deepcopy(envelope)
                body["run"]["source_run_id"] = run_id
                started = datetime.fromisoformat(body["run"]["timestamp"])
                body["run"]["timestamp"] = (
                    started + timedelta(seconds=number * 1000 + index)
                ).isoformat()
                response = http.post(
                    "/api/v1/runs", json=body, headers={"Authorization": f"Bearer {alice_key}"}
                )
                kind = response.headers.get("content-type", "")
                answers.append(
                    (run_id, response.status_code, response.json() if "json" in kind else {})
                )

    threads = [threading.Thread(target=killer)]
    threads += [threading.Thread(target=uploader, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(8)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    connection.close()

    stored = set(Submission.objects.values_list("client_run_id", flat=True))
    statuses = {}
    for run_id, status, body in answers:
        statuses[status] = statuses.get(status, 0) + 1
        if status in (200, 201):
            assert run_id in stored, (run_id, status)
        else:
            assert status == 503, (run_id, status, body)  # never a 500
            message = body["error"]["message"]
            if NOTHING_SAVED in message:
                assert run_id not in stored, (run_id, message)
    assert sum(kills) > 20, "the drill terminated too few connections to mean anything"
    assert statuses.get(201, 0) >= 3 and statuses.get(503, 0) >= 3, statuses
    print(f"drill answers: {statuses}, backends terminated: {sum(kills)}")
