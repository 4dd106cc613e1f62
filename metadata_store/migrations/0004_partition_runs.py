"""One index row per partition run instead of one per batch.

A file holds, for each partition, one run of consecutive batches (agents lay segments out
that way); the commit gives the run's batches dense offsets and stores one row: first and
last offset, byte range, batch and record counts, max timestamp. The index then grows
with files, not batches.

The rows' producer columns go: a run may hold several producers' batches. What
idempotence needs moves to the producer state, which now keeps the base sequence and
base offset of each producer's last five batches per partition (Kafka keeps the same
five), filled here from the rows before the columns are dropped. Existing rows are runs
of one batch.
"""

import importlib

import django.contrib.postgres.fields
from django.db import migrations, models

FORWARD = r"""
ALTER TABLE floe_producer_state
    ADD COLUMN recent_sequences integer[] NOT NULL DEFAULT '{}',
    ADD COLUMN recent_offsets bigint[] NOT NULL DEFAULT '{}';
UPDATE floe_producer_state s SET (recent_sequences, recent_offsets) = (
    SELECT coalesce(array_agg(x.base_sequence ORDER BY x.last_offset), '{}'),
           coalesce(array_agg(x.base_offset ORDER BY x.last_offset), '{}')
      FROM (SELECT b.base_sequence, b.base_offset, b.last_offset FROM floe_batch b
             WHERE b.partition_id = s.partition_id AND b.producer_id = s.producer_id
               AND b.producer_epoch = s.producer_epoch AND b.base_sequence >= 0
             ORDER BY b.last_offset DESC LIMIT 5) x);

ALTER TABLE floe_batch
    ADD COLUMN batch_count integer NOT NULL DEFAULT 1,
    DROP COLUMN producer_id, DROP COLUMN producer_epoch, DROP COLUMN base_sequence;
ALTER TABLE floe_batch ADD CONSTRAINT run_batch_count_valid
    CHECK (batch_count >= 1 AND batch_count <= record_count) NOT VALID;

-- The last `n` elements of an array (all of it when shorter).
CREATE OR REPLACE FUNCTION floe_tail(a anyarray, n int) RETURNS anyarray
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(a[greatest(array_lower(a, 1), array_upper(a, 1) - n + 1):array_upper(a, 1)], a)
$$;

CREATE OR REPLACE FUNCTION floe_commit(
    p_cluster bigint, p_key text, p_size bigint,
    p_part bigint[], p_count int[], p_pos bigint[], p_len int[], p_maxts bigint[],
    p_pid bigint[], p_epoch int[], p_seq int[])
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(array_length(p_part, 1), 0);
    v_file bigint;
    v_result jsonb;
    parts bigint[]; hws bigint[]; lsos bigint[];
    st_key text[]; st_part bigint[]; st_pid bigint[]; st_epoch int[]; st_seq int[];
    st_off bigint[]; st_dirty bool[];
    codes int[] := array_fill(0, ARRAY[n]);
    bases bigint[] := array_fill(-1::bigint, ARRAY[n]);
    starts bigint[] := array_fill(-1::bigint, ARRAY[n]);
    accepted int[] := '{}';
    run_of int[] := '{}';       -- run number of each accepted batch
    seq_slot int[] := '{}';     -- accepted idempotent batches: their producer-state slot,
    seq_base int[] := '{}';     --   base sequence
    seq_off bigint[] := '{}';   --   and base offset, in order
    last_in int[];              -- per locked partition: its last accepted batch
    run_in int[];               --   and that batch's run number
    i int; k int; s int; r int := 0; prev int; v_dup bigint; v_key text;
BEGIN
    INSERT INTO floe_file (cluster_id, key, size, level, state, batch_count, created_at)
    VALUES (p_cluster, p_key, p_size, 0, 'live', n, now())
    ON CONFLICT (cluster_id, key) DO NOTHING RETURNING id INTO v_file;
    IF v_file IS NULL THEN  -- a retry of a commit that already happened: same answer
        SELECT commit_result INTO v_result FROM floe_file WHERE cluster_id = p_cluster AND key = p_key;
        RETURN v_result;
    END IF;

    -- Lock the partitions in id order (no deadlocks between overlapping commits).
    SELECT array_agg(id ORDER BY id), array_agg(high_watermark ORDER BY id),
           array_agg(log_start_offset ORDER BY id)
      INTO parts, hws, lsos
      FROM (SELECT id, high_watermark, log_start_offset FROM floe_partition
             WHERE id = ANY(p_part) ORDER BY id FOR UPDATE) locked;
    parts := coalesce(parts, '{}');
    last_in := array_fill(NULL::int, ARRAY[greatest(cardinality(parts), 1)]);
    run_in := array_fill(NULL::int, ARRAY[greatest(cardinality(parts), 1)]);

    -- KIP-98 producer state of the (partition, producer) pairs this file writes; the
    -- partition locks above serialize every writer of these rows.
    SELECT array_agg(partition_id::text || ':' || producer_id::text), array_agg(partition_id),
           array_agg(producer_id), array_agg(producer_epoch::int), array_agg(last_sequence),
           array_agg(last_offset), array_agg(false)
      INTO st_key, st_part, st_pid, st_epoch, st_seq, st_off, st_dirty
      FROM floe_producer_state
     WHERE (partition_id, producer_id) IN (SELECT * FROM unnest(p_part, p_pid) u(a, b) WHERE b >= 0);
    st_key := coalesce(st_key, '{}'); st_part := coalesce(st_part, '{}');
    st_pid := coalesce(st_pid, '{}'); st_epoch := coalesce(st_epoch, '{}');
    st_seq := coalesce(st_seq, '{}'); st_off := coalesce(st_off, '{}');
    st_dirty := coalesce(st_dirty, '{}');

    FOR i IN 1..n LOOP
        k := array_position(parts, p_part[i]);
        IF k IS NULL THEN
            codes[i] := 3;  -- UNKNOWN_TOPIC_OR_PARTITION
            CONTINUE;
        END IF;
        starts[i] := lsos[k];
        s := NULL;
        IF p_pid[i] >= 0 AND p_seq[i] >= 0 THEN
            v_key := p_part[i]::text || ':' || p_pid[i]::text;
            s := array_position(st_key, v_key);
            IF s IS NOT NULL THEN
                IF p_epoch[i] < st_epoch[s] THEN
                    codes[i] := 47;  -- INVALID_PRODUCER_EPOCH
                    CONTINUE;
                ELSIF p_epoch[i] > st_epoch[s] THEN
                    IF p_seq[i] <> 0 THEN
                        codes[i] := 45;  -- OUT_OF_ORDER_SEQUENCE_NUMBER
                        CONTINUE;
                    END IF;
                ELSIF p_seq[i]::bigint <> (st_seq[s]::bigint + 1) % 2147483648 THEN
                    -- One of the producer's last five batches sent again: its original offset.
                    SELECT ps.recent_offsets[array_position(ps.recent_sequences, p_seq[i])]
                      INTO v_dup FROM floe_producer_state ps
                     WHERE ps.partition_id = p_part[i] AND ps.producer_id = p_pid[i]
                       AND ps.producer_epoch = p_epoch[i];
                    IF v_dup IS NOT NULL THEN
                        bases[i] := v_dup;  -- a duplicate: stored once
                    ELSE
                        codes[i] := 45;
                    END IF;
                    CONTINUE;
                END IF;
            END IF;
        END IF;
        bases[i] := hws[k];
        hws[k] := hws[k] + p_count[i];
        -- A partition's run goes on while its batches follow each other in the file and
        -- in offsets; anything else starts its next run.
        prev := last_in[k];
        IF prev IS NULL OR p_pos[i] <> p_pos[prev] + p_len[prev]
           OR bases[i] <> bases[prev] + p_count[prev] THEN
            r := r + 1;
            run_in[k] := r;
        END IF;
        last_in[k] := i;
        accepted := accepted || i;
        run_of := run_of || run_in[k];
        IF p_pid[i] >= 0 AND p_seq[i] >= 0 THEN
            IF s IS NULL THEN
                st_key := st_key || v_key; st_part := st_part || p_part[i];
                st_pid := st_pid || p_pid[i]; st_epoch := st_epoch || p_epoch[i];
                st_seq := st_seq || 0; st_off := st_off || 0::bigint; st_dirty := st_dirty || true;
                s := array_length(st_key, 1);
            END IF;
            st_epoch[s] := p_epoch[i];
            st_seq[s] := ((p_seq[i]::bigint + p_count[i] - 1) % 2147483648)::int;
            st_off[s] := hws[k] - 1;
            st_dirty[s] := true;
            seq_slot := seq_slot || s; seq_base := seq_base || p_seq[i]; seq_off := seq_off || bases[i];
        END IF;
    END LOOP;

    INSERT INTO floe_batch (partition_id, base_offset, last_offset, position, length,
                            record_count, batch_count, max_timestamp, file_id)
    SELECT p_part[min(u.j)], min(bases[u.j]), max(bases[u.j] + p_count[u.j] - 1),
           min(p_pos[u.j]), sum(p_len[u.j]), sum(p_count[u.j]), count(*), max(p_maxts[u.j]), v_file
      FROM unnest(accepted, run_of) AS u(j, run) GROUP BY u.run;

    UPDATE floe_partition p SET high_watermark = u.hw
      FROM unnest(parts, hws) AS u(id, hw)
     WHERE p.id = u.id AND p.high_watermark <> u.hw;

    INSERT INTO floe_producer_state AS ps (partition_id, producer_id, producer_epoch,
                                          last_sequence, last_offset, recent_sequences,
                                          recent_offsets, updated_at)
    SELECT st_part[d.slot], st_pid[d.slot], st_epoch[d.slot], st_seq[d.slot], st_off[d.slot],
           floe_tail(coalesce(a.seqs, '{}'), 5), floe_tail(coalesce(a.offs, '{}'), 5), now()
      FROM generate_subscripts(st_key, 1) AS d(slot)
      LEFT JOIN (SELECT u.slot, array_agg(u.seq ORDER BY u.ord) AS seqs,
                        array_agg(u.off ORDER BY u.ord) AS offs
                   FROM unnest(seq_slot, seq_base, seq_off) WITH ORDINALITY AS u(slot, seq, off, ord)
                  GROUP BY u.slot) a ON a.slot = d.slot
     WHERE st_dirty[d.slot]
    ON CONFLICT (partition_id, producer_id) DO UPDATE SET
        producer_epoch = EXCLUDED.producer_epoch, last_sequence = EXCLUDED.last_sequence,
        last_offset = EXCLUDED.last_offset,
        recent_sequences = floe_tail(CASE WHEN ps.producer_epoch = EXCLUDED.producer_epoch
            THEN ps.recent_sequences || EXCLUDED.recent_sequences ELSE EXCLUDED.recent_sequences END, 5),
        recent_offsets = floe_tail(CASE WHEN ps.producer_epoch = EXCLUDED.producer_epoch
            THEN ps.recent_offsets || EXCLUDED.recent_offsets ELSE EXCLUDED.recent_offsets END, 5),
        updated_at = now();

    SELECT coalesce(jsonb_agg(jsonb_build_object('error_code', codes[j], 'base_offset', bases[j],
                                                 'log_start_offset', starts[j]) ORDER BY j), '[]')
      INTO v_result FROM generate_series(1, n) AS j;
    UPDATE floe_file SET commit_result = v_result WHERE id = v_file;
    RETURN v_result;
END;
$$;
"""


# Back to one row per batch: only for a database whose runs are single batches (a test
# that rebuilds an older schema); multi-batch runs have no earlier representation.
BACKWARD = (
    """
ALTER TABLE floe_batch DROP CONSTRAINT IF EXISTS run_batch_count_valid;
ALTER TABLE floe_batch DROP COLUMN batch_count,
    ADD COLUMN producer_id bigint NOT NULL DEFAULT -1,
    ADD COLUMN producer_epoch smallint NOT NULL DEFAULT -1,
    ADD COLUMN base_sequence integer NOT NULL DEFAULT -1;
ALTER TABLE floe_producer_state DROP COLUMN recent_sequences, DROP COLUMN recent_offsets;
DROP FUNCTION IF EXISTS floe_tail(anyarray, int);
"""
    + importlib.import_module("metadata_store.migrations.0002_commit_function").COMMIT_FUNCTION
)


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0003_agent_version_roles_read_stats")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="producerstate",
                    name="recent_sequences",
                    field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.IntegerField(), default=list, size=None
                    ),
                ),
                migrations.AddField(
                    model_name="producerstate",
                    name="recent_offsets",
                    field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), default=list, size=None
                    ),
                ),
                migrations.AddField(
                    model_name="batch",
                    name="batch_count",
                    field=models.IntegerField(default=1),
                ),
                migrations.RemoveField(model_name="batch", name="producer_id"),
                migrations.RemoveField(model_name="batch", name="producer_epoch"),
                migrations.RemoveField(model_name="batch", name="base_sequence"),
                migrations.AddConstraint(
                    model_name="batch",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("batch_count__gte", 1),
                            ("batch_count__lte", models.F("record_count")),
                        ),
                        name="run_batch_count_valid",
                    ),
                ),
            ],
        )
    ]
