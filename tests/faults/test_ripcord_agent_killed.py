"""Ripcord: an agent killed mid-outage, while it holds journal entries nobody sequenced.

Two agents with ``--ripcord`` (a world of their own, as in tests/faults/test_ripcord.py),
an idempotent confluent-kafka producer at a steady rate over 12 partitions. The web
server and PostgreSQL are stopped; both agents go on acknowledging from their journals.
Once the victim's `/metrics` shows journaled bytes it has not sequenced, it is SIGKILLed
(those bytes noted); the control plane comes back `OUTAGE_S` after it went. The killed
agent stays dead until the end, so what it left can only be sequenced by the *other*
agent: its `JournalKeeper` (agents/journal_recovery.py) takes the dead journal's lease once
it has lapsed and commits every entry after the last committed one, in journal order.

Asserted: the victim held unsequenced bytes when it died; the survivor recovered entries
of its journal (`floe_journal_recovered_entries_total`), and afterwards every entry of
that journal in the bucket is a committed file; no produce error, no acknowledged record
lost, none stored twice, each partition in the producer's order. Printed: the figures and the
row of the suite's table. 2.5–3.5 minutes: listed in tests/conftest.py's LONGEST_FIRST.
"""

from __future__ import annotations

import time

import pytest

from core.storage import open_store
from tests.faults.probe import Probe
from tests.faults.ripcord import (
    ack_latencies,
    agent_metric,
    create_topic,
    figures_record,
    journals_drained,
    longest_ack,
    p99,
)
from tests.faults.world import World, world_with_moto

pytestmark = [pytest.mark.faults, pytest.mark.kafka]

RATE = 2_000  # records a second
WARM_UP_S = 5
OUTAGE_S = 30
JOURNALED_FIRST_S = 5  # into the outage before the kill: both journals hold entries
VICTIM, SURVIVOR = 1, 0


@pytest.fixture(scope="module")
def world():
    with world_with_moto(agent_flags=("--ripcord",)) as built:
        yield built


def _journal_entries(world: World, agent) -> list[str]:
    """Every entry of every journal `agent` wrote, in the bucket."""
    prefix = f"{agent.cluster_id}/journal/{agent.agent_id}/"
    return [i.key for i in open_store(world.bucket_url).list(prefix) if i.key.endswith(".seg")]


def _committed(world: World, keys: list[str]) -> set[str]:
    import psycopg

    with psycopg.connect(world.pg.url, connect_timeout=5) as conn:
        rows = conn.execute("SELECT key FROM floe_file WHERE key = ANY(%s)", [keys]).fetchall()
    return {row[0] for row in rows}


def _wait(check, timeout_s: float, interval_s: float = 0.25) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():
            return time.monotonic() - started
        time.sleep(interval_s)
    return None


# Worst cases of the bounded waits: the world (~150 s), the topic (≤ 90), the probe
# starting (30), warm-up and outage (35 + stopping and starting PostgreSQL and the web
# server, ≤ 60), the victim's journal (20), the recovery (120), acks again (60), the probe's
# flush (130), the journals draining (180), the read-back (≤ 450).
CASE_TIMEOUT_S = 1500


@pytest.mark.timeout(CASE_TIMEOUT_S)
def test_an_agent_killed_mid_outage_loses_nothing(world, request):
    topic = "ripcord-killed"
    create_topic(world, topic)
    victim, survivor = world.agents[VICTIM], world.agents[SURVIVOR]
    recovered_before = agent_metric(survivor, "floe_journal_recovered_entries_total")
    with Probe(world.bootstrap, topic, rate=RATE) as probe:
        assert probe.wait_acked(200, 30), "the probe did not get going"
        time.sleep(WARM_UP_S)
        stopped = time.monotonic()
        world.stop_control_plane()
        time.sleep(JOURNALED_FIRST_S)
        held = 0.0

        def victim_holds() -> bool:
            nonlocal held
            held = agent_metric(victim, "floe_journal_unsequenced_bytes")
            return held > 0

        assert _wait(victim_holds, 20) is not None, (
            "the victim never held unsequenced journal bytes"
        )
        victim.kill()
        killed = time.monotonic()
        time.sleep(max(0.0, OUTAGE_S - (killed - stopped)))
        restarting = time.monotonic()
        world.start_control_plane()
        back = time.monotonic()
        probe.fault_ended()

        def survivor_recovered() -> bool:
            return agent_metric(survivor, "floe_journal_recovered_entries_total") > recovered_before

        recovered_s = _wait(survivor_recovered, 120)
        assert probe.wait_acked(200, 60), "produce did not come back"
    drained_s = journals_drained(world)
    recovered = agent_metric(survivor, "floe_journal_recovered_entries_total") - recovered_before
    entries = _journal_entries(world, victim)
    uncommitted = sorted(set(entries) - _committed(world, entries))
    outcome = probe.outcome("ripcord: agent killed mid-outage")
    longest, longest_at = longest_ack(probe, stopped)
    figures = (
        f"victim held {held / 1024:.0f} KiB unsequenced at the kill ({killed - stopped:.1f} s "
        f"into the outage; control plane restarted {restarting - stopped:.1f} s after the stop, "
        f"serving after {back - stopped:.1f} s); the survivor "
        f"sequenced {recovered:.0f} of its entries "
        f"{recovered_s if recovered_s is None else round(recovered_s, 1)} s after the return; "
        f"victim's entries in the bucket {len(entries)}, uncommitted {len(uncommitted)}; "
        f"longest ack from the outage on {longest * 1000:.0f} ms, sent {longest_at:.1f} s "
        f"after the stop; p99 {p99(ack_latencies(probe, stopped)) * 1000:.0f} ms; "
        f"out of order {probe.out_of_order}; journal drained "
        f"{drained_s if drained_s is None else round(drained_s, 1)} s after the probe stopped"
    )
    figures_record(request, outcome, figures)
    assert recovered_s is not None, f"the survivor sequenced nothing of the dead journal: {figures}"
    assert not uncommitted, f"entries of the dead journal never committed: {uncommitted[:5]}"
    assert outcome.failed == 0 and outcome.lost == 0 and outcome.duplicates == 0, outcome
    assert probe.out_of_order == 0
