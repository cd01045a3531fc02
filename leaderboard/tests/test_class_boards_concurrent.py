"""Two publishes on one hardware class at once: the class board each writes holds the other's
lane too. Real transactions on Postgres, one thread each: the first holds its transaction open
after writing its board until the second is seen waiting for it."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections

from leaderboard.models import ClassBoard
from leaderboard.tests.factories import record
from runs.methods import DEFAULT_METHOD
from runs.services import refresh_stack_stats
from runs.signals import lanes_changed
from submissions.intake import import_records

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_on_a_lock(pid: int) -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def test_two_refreshes_on_one_class_at_once_each_leave_the_other_s_stack_in_its_board() -> None:
    first, second = import_records(
        [record(model_id="a:8b", overall=60.0), record(model_id="b:8b", overall=80.0)],
        refresh_stats=False,
    ).created
    class_id, version = first.hardware_class_id, first.benchmark_version
    inside, go = threading.Event(), threading.Event()
    pids: dict[str, int] = {}
    errors: list[BaseException] = []

    def hold(sender, boards, **kwargs) -> None:
        # After the board is written, inside the first refresh's transaction.
        if threading.current_thread().name == "first":
            inside.set()
            assert go.wait(30)

    def refresh(stack_id: int) -> None:
        try:
            connection.ensure_connection()
            pids[threading.current_thread().name] = connection.connection.info.backend_pid
            refresh_stack_stats(stack_ids=[stack_id])
        except BaseException as error:  # reported by the test's thread
            errors.append(error)
        finally:
            connection.close()

    lanes_changed.connect(hold, weak=False)
    try:
        one = threading.Thread(target=refresh, args=(first.stack_id,), name="first")
        one.start()
        assert inside.wait(30)
        two = threading.Thread(target=refresh, args=(second.stack_id,), name="second")
        two.start()
        deadline = time.monotonic() + 30
        while not ("second" in pids and _waiting_on_a_lock(pids["second"])):
            assert time.monotonic() < deadline, "the second refresh never waited for the first"
            time.sleep(0.02)
        go.set()
        one.join(30)
        two.join(30)
    finally:
        go.set()
        lanes_changed.disconnect(hold)
    assert not errors, errors
    board = ClassBoard.objects.get(hardware_class_id=class_id, score_scale="v3")
    assert board.benchmark_version == version
    assert board.places == {DEFAULT_METHOD: {f"s{second.stack_id}": 1, f"s{first.stack_id}": 2}}
    assert board.run_count == 2
