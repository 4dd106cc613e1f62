"""``floe_plan_runs``: a partition's runs for a fetch plan, read in index order and no
further than the plan needs.

A fetch plan asks, per partition, for the runs from an offset on while the bytes before
each stay under the partition's budget, at most 128. As one SQL query (a window sum over
the first 128 runs, then a filter) it read 128 runs per partition whatever the budget,
and the planner, guessing few runs past an unknown offset, preferred a bitmap scan of
every run from the offset on plus a sort: from offset 0, the whole partition on every
plan (commit 5c07901 forced the index; the 128 runs stayed). Here one call loops over
the plan's partitions and walks each one's runs (and transaction markers, where its range
has any) in offset order, stopping once the budget is spent: 100 partitions catching up
with 1 MiB each (32 KiB runs) cost 6.7-7.4 ms of the database instead of 15-16 ms with the
index forced (41-52 ms when the machine was slower); at the tail 1.6-1.9 ms instead of
1.2-1.3 (a loop per partition costs a little more than a lateral join). The function's
own planner settings leave its scans no choice but the ordered indexes.
"""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION floe_plan_runs(p_index int[], p_part bigint[], p_off bigint[],
                               p_budget bigint[], p_upto bigint[], p_max int,
                               p_marker_bytes int)
RETURNS TABLE (i int, base_offset bigint, last_offset bigint, "position" bigint,
               length int, batch_count int, file_id bigint, m_pid bigint,
               m_epoch smallint, m_commit bool, m_ts bigint)
LANGUAGE plpgsql STABLE ROWS 1000
SET enable_bitmapscan = off SET enable_seqscan = off AS $$
-- For each k: the runs and markers of partition p_part[k] from offset p_off[k] on, below
-- p_upto[k], in offset order, while the bytes before each stay under p_budget[k] (so the
-- one crossing it comes too: the agent trims it batch by batch, KIP-74); at most p_max,
-- each tagged i = p_index[k]. A marker counts as p_marker_bytes (its control batch) and
-- carries its transaction's fields.
DECLARE
    k int;
    used bigint;
    marked bool[];  -- per k: a transaction marker lies in the range
BEGIN
    SELECT array_agg(EXISTS (SELECT 1 FROM floe_txn_marker m
                              WHERE m.partition_id = r.pid AND m.marker_offset >= r.off
                                AND m.marker_offset < r.upto) ORDER BY r.k)
      INTO marked
      FROM unnest(p_part, p_off, p_upto) WITH ORDINALITY AS r(pid, off, upto, k);
    FOR k IN 1..coalesce(cardinality(p_part), 0) LOOP
        i := p_index[k];
        used := 0;
        IF marked[k] THEN
            FOR base_offset, last_offset, "position", length, batch_count, file_id,
                m_pid, m_epoch, m_commit, m_ts IN
                (SELECT b.base_offset, b.last_offset, b.position, b.length, b.batch_count,
                        b.file_id, NULL::bigint, NULL::smallint, NULL::bool, NULL::bigint
                   FROM floe_batch b
                  WHERE b.partition_id = p_part[k] AND b.last_offset >= p_off[k]
                    AND b.base_offset < p_upto[k]
                  ORDER BY b.last_offset LIMIT p_max)
                UNION ALL
                (SELECT m.marker_offset, m.marker_offset, 0, p_marker_bytes, 1, NULL,
                        m.producer_id, m.producer_epoch, m.committed, m.timestamp
                   FROM floe_txn_marker m
                  WHERE m.partition_id = p_part[k] AND m.marker_offset >= p_off[k]
                    AND m.marker_offset < p_upto[k]
                  ORDER BY m.marker_offset LIMIT p_max)
                ORDER BY 2 LIMIT p_max
            LOOP
                EXIT WHEN used >= p_budget[k];
                RETURN NEXT;
                used := used + length;
            END LOOP;
            CONTINUE;
        END IF;
        -- No marker in the range (no transactions there): the runs alone, half the work.
        m_pid := NULL; m_epoch := NULL; m_commit := NULL; m_ts := NULL;
        FOR base_offset, last_offset, "position", length, batch_count, file_id IN
            SELECT b.base_offset, b.last_offset, b.position, b.length, b.batch_count,
                   b.file_id
              FROM floe_batch b
             WHERE b.partition_id = p_part[k] AND b.last_offset >= p_off[k]
               AND b.base_offset < p_upto[k]
             ORDER BY b.last_offset LIMIT p_max
        LOOP
            EXIT WHEN used >= p_budget[k];
            RETURN NEXT;
            used := used + length;
        END LOOP;
    END LOOP;
END;
$$;
"""

BACKWARD = "DROP FUNCTION floe_plan_runs(int[], bigint[], bigint[], bigint[], bigint[], int, int);"


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0008_commit_files")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
