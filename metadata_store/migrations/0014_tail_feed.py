"""The tail feed (issue 28): ``floe_commit_files`` announces the index runs it writes.

Agents plan fetches at the tail from a tail index of their own (``agents/tail_index.py``)
fed by the control plane's relay of these notifications (``agent_api/tail_feed.py``).
The commit sends them itself, in its own transaction — PostgreSQL delivers a
transaction's notifications when it commits, in commit order — and no trigger does: a
per-row trigger on floe_batch or floe_partition that notified cost the commit path 10-25 %
(``bench/metadata_commit.py --seconds 8 --committers 8``).

One ``pg_notify('floe_tail', …)`` per file of the group and 40 of its runs (PostgreSQL's
limit is 8000 bytes: a key is at most 512 bytes, a line at most 159):

    r <cluster id> <file key>
    <partition row id> <base offset> <last offset> <position> <length> <batch count>
        <first offset of the oldest open transaction, -1: none> <log start>
    …                                                   (one line per run, in run order)

Partitions are named by their row ids, the cheapest to write (the relay, which reads a
partition's topic and index once, names them for the agents): measured on 100-batch
commits over 50 partitions, topic ids as text in every line and a notification per 32
runs cost ~0.39 ms of the database per commit, the notification itself ~0.1-0.2 ms. The
other writers of the index (retention, DeleteRecords, compaction swaps, transaction
markers, topic deletion) send ``x <cluster id>`` lines naming the partitions they changed
(``metadata_store/tail_feed.py``).
"""

import importlib

from django.db import migrations

_0008 = importlib.import_module("metadata_store.migrations.0008_commit_files")
_START = _0008.FORWARD.index("CREATE FUNCTION floe_commit_files(")
OLD = (
    "CREATE OR REPLACE"
    + _0008.FORWARD[_START + len("CREATE") : _0008.FORWARD.index("$$;", _START) + 3]
)

NOTIFY = r"""
    -- The tail feed: each run written, with what a plan needs, after the partitions'
    -- open transactions took their first offsets (migration 0013); one notification
    -- per file and ~7000 bytes of its runs.
    IF cardinality(accepted) > 0 THEN
        -- (Open transactions are rare: the LSO's lookup only where a partition has one.)
        IF EXISTS (SELECT 1 FROM floe_txn_partition tp
                    WHERE tp.partition_id = ANY(parts) AND tp.first_offset IS NOT NULL) THEN
            SELECT array_agg(tp.partition_id), array_agg(tp.first_offset)
              INTO lso_part, lso_off
              FROM (SELECT partition_id, min(first_offset) AS first_offset
                      FROM floe_txn_partition
                     WHERE partition_id = ANY(parts) AND first_offset IS NOT NULL
                     GROUP BY partition_id) tp;
        ELSE
            lso_part := '{}'; lso_off := '{}';
        END IF;
        SELECT count(pg_notify('floe_tail', z.note)) INTO v_rows
          FROM (SELECT 'r ' || p_cluster || ' ' || p_keys[x.f] || E'\n'
                       || string_agg(x.line, E'\n' ORDER BY x.run) AS note
                  FROM (SELECT u.run, run_file[u.run] AS f,
                               concat_ws(' ', p_part[min(u.j)], min(bases[u.j]),
                                         max(bases[u.j] + p_count[u.j] - 1), min(p_pos[u.j]),
                                         sum(p_len[u.j]), sum(p_nbatch[u.j]),
                                         coalesce(lso_off[array_position(lso_part,
                                                                          p_part[min(u.j)])],
                                                  -1),
                                         lsos[place[min(u.j)]]) AS line
                          FROM unnest(accepted, run_of) AS u(j, run)
                         GROUP BY u.run) x
                 GROUP BY x.f, (x.run - 1) / 40
                 ORDER BY x.f, min(x.run)) z;
    END IF;

    -- The files last:"""


def _edit(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"migration 0013: {old!r} is not in floe_commit_files once")
    return text.replace(old, new)


NEW = _edit(
    _edit(OLD, "\n    -- The files last:", NOTIFY),
    "    v_rows int;\nBEGIN",
    "    v_rows int;\n    lso_part bigint[]; lso_off bigint[];  -- open transactions' first offsets\nBEGIN",
)


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0013_offset_metadata_bytes")]

    operations = [migrations.RunSQL(NEW, reverse_sql=OLD)]
