"""The heartbeat's per-client produce counts stay bounded whatever client ids clients
choose: the first 32 are counted alone, the rest together under "", each id cut to 255
characters — what the heartbeat's schema accepts."""

from __future__ import annotations

import msgspec

from agents.client_stats import MAX_CLIENTS, ProducerStats, diagnostics_stats
from metadata_store.agent_api.schemas import AgentReadStats


def test_the_first_32_client_ids_are_counted_alone_and_the_rest_together():
    stats = ProducerStats()
    for n in range(MAX_CLIENTS + 10):
        stats.count(f"client-{n}", 2, 3)
    stats.count("client-0", 1, 100)
    stats.count("x" * 1000, 1, 1)
    report = stats.report()
    assert len(report) == MAX_CLIENTS + 1
    assert report["client-0"] == [2, 3, 103]
    assert report[""] == [11, 21, 31]  # the 10 past the first 32, and the long one


def test_the_report_is_what_the_heartbeat_schema_accepts(monkeypatch):
    stats = ProducerStats()
    for n in range(100):
        stats.count(str(n) + "y" * 300, 1, 1)
    monkeypatch.setattr("agents.client_stats.PRODUCERS", stats)
    body = diagnostics_stats(7, 7000, {"age": 6, "size": 1})
    decoded = msgspec.json.decode(msgspec.json.encode(body), type=AgentReadStats)
    assert decoded.files_committed == 7 and decoded.flush_reasons == {"age": 6, "size": 1}
    assert len(decoded.producers) == MAX_CLIENTS + 1
