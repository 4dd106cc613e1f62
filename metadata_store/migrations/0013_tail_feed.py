"""The tail feed (issue 28): ``floe_commit_files`` announces the index runs it writes.

Agents plan fetches at the tail from a tail index of their own (``agents/tail_index.py``)
fed by the control plane's relay of these notifications (``agent_api/tail_feed.py``).
The commit sends them itself, in its own transaction — PostgreSQL delivers a
transaction's notifications when it commits, in commit order — and no trigger does: a
per-row trigger on floe_batch or floe_partition that notified cost the commit path 10-25 %
(``bench/metadata_commit.py --seconds 8 --committers 8``).

One ``pg_notify('floe_tail', …)`` per file of the group and 32 of its runs (a payload
stays far under PostgreSQL's 8000 bytes: a 512-byte key and 32 lines of at most ~170):

    r <cluster id> <file key>
    <topic id> <partition index> <base offset> <last offset> <position> <length>
        <batch count> <first offset of the oldest open transaction, -1: none> <log start>
    …                                                   (one line per run, in run order)

The partitions' topic ids and indexes come with the rows the commit locks anyway. The
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
    -- The tail feed: each run written, with what a plan needs, after the partition's
    -- open transactions took their first offsets (migration 0013).
    IF cardinality(accepted) > 0 THEN
        SELECT count(pg_notify('floe_tail', c.note)) INTO v_rows FROM (
            SELECT 'r ' || p_cluster || ' ' || p_keys[x.f] || E'\n'
                   || string_agg(concat_ws(' ', ptopic[x.k], pidx[x.k], x.base, x.last, x.pos,
                                           x.len, x.nb, coalesce(o.lso, -1), lsos[x.k]),
                                 E'\n' ORDER BY x.run) AS note
              FROM (SELECT u.run, run_file[u.run] AS f, place[min(u.j)] AS k,
                           min(bases[u.j]) AS base, max(bases[u.j] + p_count[u.j] - 1) AS last,
                           min(p_pos[u.j]) AS pos, sum(p_len[u.j]) AS len,
                           sum(p_nbatch[u.j]) AS nb
                      FROM unnest(accepted, run_of) AS u(j, run) GROUP BY u.run) x
              LEFT JOIN (SELECT tp.partition_id, min(tp.first_offset) AS lso
                           FROM floe_txn_partition tp
                          WHERE tp.partition_id = ANY(parts) AND tp.first_offset IS NOT NULL
                          GROUP BY tp.partition_id) o ON o.partition_id = parts[x.k]
             GROUP BY x.f, (x.run - 1) / 32
             ORDER BY x.f, min(x.run)) c;
    END IF;

    -- The files last:"""


def _edit(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"migration 0013: {old!r} is not in floe_commit_files once")
    return text.replace(old, new)


NEW = OLD
for _old, _new in [
    (
        "    v_rows int;\nBEGIN",
        "    v_rows int;\n    ptopic uuid[]; pidx int[];  -- the locked partitions' topics, indexes\nBEGIN",
    ),
    (
        "SELECT id, high_watermark, log_start_offset FROM floe_partition\n",
        'SELECT id, high_watermark, log_start_offset, topic_id, "index" FROM floe_partition\n',
    ),
    (
        "SELECT l.id, l.high_watermark, l.log_start_offset, row_number()",
        'SELECT l.id, l.high_watermark, l.log_start_offset, l.topic_id, l."index", row_number()',
    ),
    (
        "(SELECT array_agg(nextval(file_ids)) FROM generate_series(1, nf))\n",
        "(SELECT array_agg(nextval(file_ids)) FROM generate_series(1, nf)),\n"
        "           (SELECT array_agg(m.topic_id ORDER BY m.num) FROM numbered m),\n"
        '           (SELECT array_agg(m."index" ORDER BY m.num) FROM numbered m)\n',
    ),
    ("INTO parts, hws, lsos, place, f_id;", "INTO parts, hws, lsos, place, f_id, ptopic, pidx;"),
    ("\n    -- The files last:", NOTIFY),
]:
    NEW = _edit(NEW, _old, _new)


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0012_clusters_from_virtualclusters")]

    operations = [migrations.RunSQL(NEW, reverse_sql=OLD)]
