"""Group commit: concurrent commits share transactions, each gets its own answer, one
failing file fails alone, and offsets stay dense."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from metadata_store import store
from metadata_store.agent_api.schemas import commit_batches
from metadata_store.commit_group import CommitGroup
from metadata_store.models import Partition
from metadata_store.topics import topic_create
from tests.factories import make_cluster
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db(transaction=True)


def _commit(cluster, tid: str, name: str, partitions=(0, 1, 2)) -> list[dict]:
    try:
        return store.file_commit(
            cluster_id=cluster.pk,
            file_key=f"{cluster.public_id}/segments/{name}.seg",
            size=1000,
            batches=commit_batches([batch(tid, p, 2, pos=p * 100) for p in partitions]),
        )
    finally:
        connection.close()  # each thread has its own connection


def _slow_first_then_together(
    monkeypatch, inject_trigger, cluster_name: str, failure: str, names: list[str]
) -> tuple[str, dict[str, object], list[int]]:
    """A commit named "slow" waits 1 s inside its transaction while the commits `names`
    queue behind it (they form the next group); a file whose key holds "bad" or "cancel"
    fails inside the commit with `failure` (PL/pgSQL). (topic id, answers, group sizes)."""
    cluster, _ = make_cluster(cluster_name)
    tid = str(topic_create(cluster=cluster, name="t", num_partitions=3).id)
    groups: list[int] = []
    real = CommitGroup._run_group

    def counting(self, group):
        groups.append(len(group))
        real(self, group)

    monkeypatch.setattr(CommitGroup, "_run_group", counting)
    inject_trigger(
        "floe_file",
        "IF NEW.key LIKE '%%slow%%' THEN PERFORM pg_sleep(1); END IF;"
        f" IF NEW.key LIKE '%%bad%%' OR NEW.key LIKE '%%cancel%%' THEN {failure} END IF;"
        " RETURN NEW;",
    )
    answers: dict[str, object] = {}

    def commit(name: str) -> None:
        try:
            answers[name] = _commit(cluster, tid, name)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            answers[name] = exc

    first = threading.Thread(target=commit, args=("slow",))
    first.start()
    while not groups:
        time.sleep(0.005)
    others = [threading.Thread(target=commit, args=(name,)) for name in names]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join(30)
    return tid, answers, groups


def _dense_but(failed: str, tid: str, answers: dict[str, object]) -> None:
    """Every commit but `failed` landed once, offsets dense; `failed` raised."""
    assert isinstance(answers[failed], Exception), answers
    good = [a for name, a in answers.items() if name != failed]
    assert all(not isinstance(a, Exception) for a in good), answers
    assert sorted(a[0]["base_offset"] for a in good) == list(range(0, 2 * len(good), 2))
    hw = set(Partition.objects.filter(topic_id=tid).values_list("high_watermark", flat=True))
    assert hw == {2 * len(good)}


def test_concurrent_commits_share_transactions_and_get_their_own_answers(
    monkeypatch, inject_trigger
):
    tid, answers, groups = _slow_first_then_together(
        monkeypatch,
        inject_trigger,
        "group",
        "RAISE EXCEPTION 'injected failure';",
        [f"f{n}" for n in range(10)] + ["bad"],
    )
    assert "injected failure" in str(answers["bad"])
    _dense_but("bad", tid, answers)
    assert groups[0] == 1 and sum(groups) == 12 and len(groups) < 12, groups


def test_a_failure_no_function_can_catch_fails_that_commit_alone(monkeypatch, inject_trigger):
    """Even a failure that aborts the group's transaction from inside the database (a
    canceled statement, which no PL/pgSQL handler catches) fails only its own commit: the
    group runs again commit by commit, and the others land once each, dense."""
    tid, answers, groups = _slow_first_then_together(
        monkeypatch,
        inject_trigger,
        "group-canceled",
        "RAISE EXCEPTION 'injected cancel' USING ERRCODE = 'query_canceled';",
        [f"f{n}" for n in range(5)] + ["cancel"] + [f"g{n}" for n in range(5)],
    )
    assert groups == [1, 11], groups  # the slow file alone, then the others together
    assert "injected cancel" in str(answers["cancel"])
    _dense_but("cancel", tid, answers)
