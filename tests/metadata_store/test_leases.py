"""The one lease rule of background work (metadata_store.leases): a new epoch and token
with every lease, taken only when free or expired, expiry on the database's clock — a
web process whose clock is wrong neither expires nor keeps a lease — and a superseded or
expired lease refused, with why."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils import timezone

from metadata_store import leases
from metadata_store.models import Lease

pytestmark = pytest.mark.django_db

SUBJECT = "migration mig_lease_test"


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _expire():
    Lease.objects.filter(subject=SUBJECT).update(expires_at=Now() - timedelta(seconds=1))


def test_each_lease_has_the_next_epoch_and_a_new_token_and_only_when_free(alice):
    cluster_id = alice["cluster"].pk
    first = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-1", seconds=30)
    assert first is not None and first.epoch == 1
    assert (
        leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-2", seconds=30)
        is None
    )
    _expire()
    second = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-2", seconds=30)
    assert second is not None and second.epoch == 2 and second.token != first.token
    assert second.holder == "agt-2"
    leases.lease_end(cluster_id=cluster_id, subject=SUBJECT, token=second.token)
    third = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-1", seconds=30)
    assert third is not None and third.epoch == 3


def test_the_expiry_is_the_databases_clock_not_the_web_process(alice, monkeypatch):
    cluster_id = alice["cluster"].pk
    # A web process whose clock is an hour ahead (or behind) changes nothing.
    monkeypatch.setattr(timezone, "now", lambda: _db_now() + timedelta(hours=1))
    before = _db_now()
    taken = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-1", seconds=20)
    assert taken is not None
    assert before + timedelta(seconds=20) <= taken.expires_at <= _db_now() + timedelta(seconds=20)
    renewed = leases.lease_renew(
        cluster_id=cluster_id, subject=SUBJECT, token=taken.token, seconds=40
    )
    assert renewed.expires_at > taken.expires_at
    assert leases.leases_live(cluster_id=cluster_id, subjects=[SUBJECT])[SUBJECT].epoch == 1
    monkeypatch.setattr(timezone, "now", lambda: _db_now() - timedelta(hours=1))
    _expire()
    assert leases.leases_expired(cluster_id=cluster_id, subjects=[SUBJECT]) == {SUBJECT}


def test_a_superseded_or_expired_lease_is_refused_with_why(alice):
    cluster_id = alice["cluster"].pk
    first = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-1", seconds=30)
    _expire()
    # Expired, though nobody took it: neither renewed nor accepted.
    with pytest.raises(leases.LeaseLost, match="expired"):
        leases.lease_renew(cluster_id=cluster_id, subject=SUBJECT, token=first.token, seconds=30)
    with pytest.raises(leases.LeaseLost, match="expired"), transaction.atomic():
        leases.lease_check(cluster_id=cluster_id, subject=SUBJECT, token=first.token)
    second = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-2", seconds=30)
    with pytest.raises(leases.LeaseLost, match=r"superseded"), transaction.atomic():
        leases.lease_check(cluster_id=cluster_id, subject=SUBJECT, token=first.token)
    with pytest.raises(leases.LeaseLost, match="not leased"), transaction.atomic():
        leases.lease_check(cluster_id=cluster_id, subject="job jr_none", token=second.token)
    with transaction.atomic():
        assert (
            leases.lease_check(cluster_id=cluster_id, subject=SUBJECT, token=second.token).holder
            == "agt-2"
        )


@pytest.mark.django_db(transaction=True)
def test_a_takeover_waits_for_the_writes_that_checked_the_old_lease(alice):
    """A check share-locks the lease until its transaction ends: a new lease is taken
    only after it, so a write is either before the takeover or refused."""
    cluster_id = alice["cluster"].pk
    first = leases.lease_take(cluster_id=cluster_id, subject=SUBJECT, holder="agt-1", seconds=1)
    taken: list = []
    with transaction.atomic():
        leases.lease_check(cluster_id=cluster_id, subject=SUBJECT, token=first.token)

        def take_over():
            try:
                deadline = timezone.now() + timedelta(seconds=10)
                while not taken and timezone.now() < deadline:
                    got = leases.lease_take(
                        cluster_id=cluster_id, subject=SUBJECT, holder="agt-2", seconds=30
                    )
                    if got is not None:
                        taken.append(got)
            finally:
                connection.close()

        thread = threading.Thread(target=take_over)
        thread.start()
        thread.join(2.5)  # the lease expired meanwhile: the takeover waits on our check
        assert thread.is_alive() and not taken
    thread.join(10)
    assert taken and taken[0].epoch == 2


def test_a_lease_lasts_what_its_holder_asks_within_its_kinds_bounds():
    """One rule for both kinds of work: at least 10 s; a job's at most an hour (a Spark
    step between two renewals), a migration copier's at most 10 minutes."""
    job, migration = leases.job_subject("jr_x"), leases.migration_subject("mig_x")
    assert [leases.lease_seconds(job, s) for s in (1, 60, 7200)] == [10, 60, 3600]
    assert [leases.lease_seconds(migration, s) for s in (1, 60, 7200)] == [10, 60, 600]
