"""The tail feed (issue 28): ``floe_commit_files`` announces the index runs it writes.

Agents plan fetches at the tail from a tail index of their own (``agents/tail_index.py``)
fed by the control plane's relay of these notifications (``agent_api/tail_feed.py``).
The commit sends them itself, in its own transaction — PostgreSQL delivers a
transaction's notifications when it commits, in commit order — and no trigger does: a
per-row trigger on floe_batch or floe_partition that notified cost the commit path 10-25 %
(``bench/metadata_commit.py --seconds 8 --committers 8``).

One ``pg_notify('floe_tail', …)`` per commit transaction (a group of agents' file
commits): each notification wakes the relay's backend and the web process's loop, and the feed
with one per file cost the commit path ~10-20 %. It is split only where it would pass
PostgreSQL's 8000 bytes (a key is at most 512 characters, a run's line at most 159 bytes: a
note's runs are counted to 7800 bytes less twice its longest key's section head, and a
file split between two notes has its key in both):

    r <cluster id>
    f <file key>
    <partition row id> <base offset> <last offset> <position> <length> <batch count>
        <first offset of the oldest open transaction, -1: none> <log start>
    …                                                   (one line per run, in run order)
    f <file key>                                        (the group's next file)
    …

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
    -- open transactions took their first offsets (migration 0014); one notification
    -- per commit, split only where it would pass PostgreSQL's 8000 bytes.
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
        -- Bytes of the notes: a run's line counts its bytes, a file's section head the
        -- longest head's (so a note of limit + a line + a head + "r <cluster>" < 8000).
        SELECT max(octet_length(fk.key)) + 3, 7800 - 2 * (max(octet_length(fk.key)) + 3)
          INTO note_head, note_limit FROM unnest(p_keys) AS fk(key);
        SELECT count(pg_notify('floe_tail', z.note)) INTO v_rows
          FROM (SELECT 'r ' || p_cluster || string_agg(s.section, '' ORDER BY s.f) AS note
                  FROM (SELECT y.chunk, y.f,
                               E'\nf ' || p_keys[y.f] || E'\n'
                               || string_agg(y.line, E'\n' ORDER BY y.run) AS section
                          FROM (SELECT x.f, x.run, x.line,
                                       (sum(octet_length(x.line) + 1)
                                          OVER (ORDER BY x.f, x.run) + x.f * note_head - 1)
                                         / note_limit AS chunk
                                  FROM (SELECT u.run, run_file[u.run] AS f,
                                               concat_ws(' ', p_part[min(u.j)], min(bases[u.j]),
                                                         max(bases[u.j] + p_count[u.j] - 1),
                                                         min(p_pos[u.j]), sum(p_len[u.j]),
                                                         sum(p_nbatch[u.j]),
                                                         coalesce(lso_off[array_position(
                                                                    lso_part, p_part[min(u.j)])],
                                                                  -1),
                                                         lsos[place[min(u.j)]]) AS line
                                          FROM unnest(accepted, run_of) AS u(j, run)
                                         GROUP BY u.run) x) y
                         GROUP BY y.chunk, y.f) s
                 GROUP BY s.chunk
                 ORDER BY s.chunk) z;
    END IF;

    -- The files last:"""


def _edit(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"migration 0014: {old!r} is not in floe_commit_files once")
    return text.replace(old, new)


NEW = _edit(
    _edit(OLD, "\n    -- The files last:", NOTIFY),
    "    v_rows int;\nBEGIN",
    "    v_rows int;\n    lso_part bigint[]; lso_off bigint[];  -- open transactions' first offsets\n"
    "    note_head int; note_limit int;  -- the notes' bytes\nBEGIN",
)


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0013_offset_metadata_bytes")]

    operations = [migrations.RunSQL(NEW, reverse_sql=OLD)]
