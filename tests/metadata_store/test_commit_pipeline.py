"""Group commit on the web server's event loop: commits that arrive while a group is in the
database go out together as the next one, each gets its own answer, a failing file fails
alone, the database being out of reach fails the group at once, offsets stay dense."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from metadata_store import store
from metadata_store.agent_api import endpoint
from metadata_store.agent_api.asgi import AgentApi, _conninfo
from metadata_store.agent_api.schemas import commit_batches
from metadata_store.models import Partition, SegmentFile
from metadata_store.topics import topic_create
from tests.factories import make_cluster
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db(transaction=True)


def _prepared(cluster, tid: str, name: str, partitions=(0, 1, 2)) -> store.FileCommit:
    batches = commit_batches([batch(tid, p, 2, pos=p * 100) for p in partitions])
    return store.file_commit_prepare(
        file_key=f"{cluster.public_id}/segments/{name}.seg",
        size=1000,
        batches=batches,
        ids=store.partition_ids(cluster.pk, batches),
    )


def _counting(api: AgentApi) -> list[int]:
    """The size of every statement the pipeline runs."""
    sizes: list[int] = []
    execute = api.pipeline._execute

    async def counted(cluster_id, commits):
        sizes.append(len(commits))
        return await execute(cluster_id, commits)

    api.pipeline._execute = counted
    return sizes


def _run_slow_first(cluster, tid: str, names: list[str]) -> tuple[dict, list[int]]:
    """A commit named "slow" (1 s inside the database, by the test's trigger) and, while
    it runs, commits named `names`: each one's answer (or exception), and the statements'
    sizes."""
    api = AgentApi(None, routes=dict)
    sizes = _counting(api)
    prepared = {name: _prepared(cluster, tid, name) for name in ["slow", *names]}

    async def main() -> dict:
        async def one(name: str):
            try:
                return store.batch_answers(*await api.pipeline.commit(cluster.pk, prepared[name]))
            except Exception as exc:  # noqa: BLE001 - the test looks at it
                return exc

        try:
            first = asyncio.create_task(one("slow"))
            while not sizes:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.1)  # the slow commit is in the database
            rest = await asyncio.gather(*(one(name) for name in names))
            answers = dict(zip(names, rest, strict=True))
            answers["slow"] = await first
            return answers
        finally:
            await api.close()

    return asyncio.run(main()), sizes


def _topic(name: str):
    cluster, _ = make_cluster(name)
    return cluster, str(topic_create(cluster=cluster, name="t", num_partitions=3).id)


def _dense_but(failed: set[str], tid: str, answers: dict) -> None:
    assert all(isinstance(answers[name], Exception) for name in failed), answers
    good = [a for name, a in answers.items() if name not in failed]
    assert all(not isinstance(a, Exception) for a in good), answers
    assert sorted(a[0]["base_offset"] for a in good) == list(range(0, 2 * len(good), 2))
    hw = set(Partition.objects.filter(topic_id=tid).values_list("high_watermark", flat=True))
    assert hw == {2 * len(good)}


def test_commits_arriving_together_are_one_statement_and_get_their_own_answers(inject_trigger):
    cluster, tid = _topic("pipeline")
    inject_trigger(
        "floe_file",
        "IF NEW.key LIKE '%%slow%%' THEN PERFORM pg_sleep(1); END IF; RETURN NEW;",
    )
    answers, sizes = _run_slow_first(cluster, tid, [f"f{n}" for n in range(10)])
    assert sizes == [1, 10], sizes  # the slow file alone, then the ten waiting together
    _dense_but(set(), tid, answers)
    assert SegmentFile.objects.filter(cluster=cluster).count() == 11


def test_a_failing_file_fails_alone_and_the_others_land_once(inject_trigger):
    cluster, tid = _topic("pipeline-bad")
    inject_trigger(
        "floe_file",
        "IF NEW.key LIKE '%%slow%%' THEN PERFORM pg_sleep(1); END IF;"
        " IF NEW.key LIKE '%%bad%%' THEN RAISE EXCEPTION 'injected failure'; END IF;"
        " RETURN NEW;",
    )
    answers, sizes = _run_slow_first(cluster, tid, [f"f{n}" for n in range(5)] + ["bad"])
    # The group of six fails as a whole, then each of its commits runs alone.
    assert sizes == [1, 6, 1, 1, 1, 1, 1, 1], sizes
    assert "injected failure" in str(answers["bad"])
    _dense_but({"bad"}, tid, answers)


def test_a_failure_no_function_can_catch_fails_that_commit_alone(inject_trigger):
    """A canceled statement (which no PL/pgSQL handler catches) in one file of a group:
    the others land once each, dense."""
    cluster, tid = _topic("pipeline-cancel")
    inject_trigger(
        "floe_file",
        "IF NEW.key LIKE '%%slow%%' THEN PERFORM pg_sleep(1); END IF;"
        " IF NEW.key LIKE '%%cancel%%' THEN"
        " RAISE EXCEPTION 'injected cancel' USING ERRCODE = 'query_canceled'; END IF;"
        " RETURN NEW;",
    )
    names = [f"f{n}" for n in range(3)] + ["cancel"] + [f"g{n}" for n in range(3)]
    answers, sizes = _run_slow_first(cluster, tid, names)
    assert sizes[:2] == [1, 7] and len(sizes) == 9, sizes
    assert "injected cancel" in str(answers["cancel"])
    _dense_but({"cancel"}, tid, answers)


def test_one_file_key_twice_in_a_group_is_stored_once_with_one_answer(inject_trigger):
    cluster, tid = _topic("pipeline-twice")
    inject_trigger(
        "floe_file",
        "IF NEW.key LIKE '%%slow%%' THEN PERFORM pg_sleep(1); END IF; RETURN NEW;",
    )
    api = AgentApi(None, routes=dict)
    prepared = {name: _prepared(cluster, tid, name) for name in ["slow", "twice", "other"]}

    async def main():
        commit = api.pipeline.commit
        try:
            first = asyncio.create_task(commit(cluster.pk, prepared["slow"]))
            await asyncio.sleep(0.2)
            rows = await asyncio.gather(
                commit(cluster.pk, prepared["twice"]),
                commit(cluster.pk, prepared["twice"]),
                commit(cluster.pk, prepared["other"]),
            )
            await first
            return [store.batch_answers(*row) for row in rows]
        finally:
            await api.close()

    twice, again, other = asyncio.run(main())
    assert twice == again and twice[0]["error_code"] == 0
    assert sorted([twice[0]["base_offset"], other[0]["base_offset"]]) == [2, 4]
    assert SegmentFile.objects.filter(cluster=cluster, key__endswith="twice.seg").count() == 1


def test_a_lock_not_had_in_time_fails_the_whole_group_at_once(settings):
    """A partition's row lock held by someone else: the waiting group fails after the lock
    timeout, every commit of it with 503, without each waiting the timeout out again."""
    settings.FLOE_AGENT_API_LOCK_TIMEOUT_MS = 300
    cluster, tid = _topic("pipeline-locked")
    api = AgentApi(None, routes=dict)
    sizes = _counting(api)
    prepared = [_prepared(cluster, tid, f"l{n}") for n in range(5)]
    held = Partition.objects.get(topic_id=tid, index=1).pk

    async def main():
        loop = asyncio.get_running_loop()
        try:
            with psycopg.connect(_conninfo()) as holder:
                holder.execute("SELECT 1 FROM floe_partition WHERE id = %s FOR UPDATE", [held])
                started = loop.time()
                first = asyncio.create_task(api.pipeline.commit(cluster.pk, prepared[0]))
                await asyncio.sleep(0.05)
                rest = asyncio.gather(
                    *(api.pipeline.commit(cluster.pk, p) for p in prepared[1:]),
                    return_exceptions=True,
                )
                outcomes = [*await asyncio.gather(first, return_exceptions=True), *await rest]
                elapsed = loop.time() - started
                holder.rollback()
            # The lock gone, the same commits land.
            rows = await asyncio.gather(*(api.pipeline.commit(cluster.pk, p) for p in prepared))
            return outcomes, elapsed, rows
        finally:
            await api.close()

    outcomes, elapsed, rows = asyncio.run(main())
    assert sizes[:2] == [1, 4], sizes
    assert all(isinstance(o, psycopg.errors.LockNotAvailable) for o in outcomes), outcomes
    assert elapsed < 2.0, elapsed  # two lock timeouts of 0.3 s, not five
    assert endpoint.failure("commit", outcomes[1])[0] == 503
    assert sorted(store.batch_answers(*row)[0]["base_offset"] for row in rows) == [0, 2, 4, 6, 8]
