"""One call commits a whole group of files: ``floe_commit_files``.

``floe_commit`` took one file per call, inside a transaction the web process opened and
closed around a group of such calls: BEGIN, a lock statement, one call per file and
COMMIT were each a round trip while the group held its partitions' locks, and each file
paid every statement's fixed cost (on a 2-core machine ~0.15-0.2 ms each, nine per file)
and built its answer as 100 jsonb objects (0.8 ms). ``floe_commit_files`` takes every
file of a group at once and runs as one statement in autocommit: one round trip, one
transaction, one WAL flush; the partitions are locked once in id order, the index runs
of all files are one INSERT, every partition's watermark one UPDATE.

It also takes over the transactional checks the web process made before calling
``floe_commit`` (KIP-98: an unknown producer, an old epoch, a partition not added to the
open transaction are refused per batch) and the first offsets of open transactions.

A file's answer is stored as arrays instead of 100 jsonb objects: ``commit_offsets`` (each
batch's base offset), ``commit_errors`` (each batch's error code; NULL when all are 0),
``commit_log_starts`` (each batch's log start offset; NULL when those of the batches
given offsets are all 0 and the others -1, as for any partition never trimmed) and
``commit_duplicates`` (the 1-based positions of idempotent duplicates; NULL when none) —
an 800-byte row for a 100-batch file of young partitions, under PostgreSQL's 2 KB TOAST
threshold (a jsonb or a bigint[4][n] answer is compressed into TOAST on every commit).
Files committed before keep their ``commit_result`` and a retry of them is answered from
it. A refused batch's answer carries log start offset -1, as Kafka's does.

A file key committed before (a retry) gets its stored answer and its batches are left
alone. A key committed by a concurrent group, or twice in one group, makes the final
INSERT of the files find a conflict: the function raises, nothing of the group is kept,
and the caller runs each file alone (``commit_pipeline``), where the retry is answered.
"""

import importlib

from django.contrib.postgres.fields import ArrayField
from django.db import migrations, models

FORWARD = r"""
ALTER TABLE floe_file ADD COLUMN commit_offsets bigint[], ADD COLUMN commit_errors int[],
    ADD COLUMN commit_log_starts bigint[], ADD COLUMN commit_duplicates int[];

CREATE FUNCTION floe_commit_files(
    p_cluster bigint, p_keys text[], p_sizes bigint[], p_entries int[],
    p_part bigint[], p_count int[], p_nbatch int[], p_pos bigint[], p_len int[],
    p_maxts bigint[], p_pid bigint[], p_epoch int[], p_seq int[], p_txn bool[])
RETURNS TABLE (file_key text, error_codes int[], base_offsets bigint[],
               log_start_offsets bigint[], duplicates int[], old_answer jsonb)
LANGUAGE plpgsql AS $$
-- p_keys, p_sizes, p_entries: the files, in commit order, and how many entries each
-- one's commit has. Then one element per entry (a record batch, or several side by side
-- without a producer id: p_nbatch), file by file, each file's in its own order:
-- p_part[i] the entry's partition row id (-1: unknown to the cluster), p_count[i] its
-- records, p_pos[i] and p_len[i] its bytes in the file, and its producer's fields.
DECLARE
    nf int := coalesce(cardinality(p_keys), 0);
    n int := coalesce(cardinality(p_part), 0);
    file_ids regclass := pg_get_serial_sequence('floe_file', 'id')::regclass;
    skip bool[];               -- per file: committed before, answered from storage
    f_id bigint[];             -- per file: its row id
    f_lo int[] := '{}';        -- per file: its first entry
    f_hi int[] := '{}';        --   and its last (f_lo - 1 when it has none)
    parts bigint[]; hws bigint[]; lsos bigint[];  -- the locked partitions, by id
    place bigint[];            -- per entry: its partition's place in parts (NULL: unknown)
    st_key text[]; st_part bigint[]; st_pid bigint[]; st_epoch int[]; st_seq int[];
    st_off bigint[]; st_dirty bool[];
    tx_pid bigint[]; tx_epoch int[]; tx_state text[]; tx_parts text[];
    tx_w_part bigint[] := '{}'; tx_w_pid bigint[] := '{}'; tx_w_off bigint[] := '{}';
    codes int[] := array_fill(0, ARRAY[n]);
    bases bigint[] := array_fill(-1::bigint, ARRAY[n]);
    starts bigint[] := array_fill(-1::bigint, ARRAY[n]);
    dup int[] := array_fill(0, ARRAY[n]);
    accepted int[] := '{}';     -- the entries given offsets
    run_of int[] := '{}';       --   and the run each is in
    run_file int[] := '{}';     -- per run: its file
    seq_slot int[] := '{}';     -- accepted idempotent batches: their producer-state slot,
    seq_base int[] := '{}';     --   base sequence
    seq_off bigint[] := '{}';   --   base offset
    seq_ep int[] := '{}';       --   and epoch, in order
    last_in int[];              -- per locked partition: its last accepted entry
    run_in int[];               --   and that entry's run number
    idempotent bool := 0 <= ANY(p_pid);
    i int; f int; k int; s int; r int := 0; prev int; v_dup bigint; v_key text;
    v_rows int;
BEGIN
    IF nf = 0 THEN
        RETURN;
    END IF;
    k := 1;
    FOR f IN 1..nf LOOP
        f_lo := f_lo || k;
        k := k + p_entries[f];
        f_hi := f_hi || (k - 1);
    END LOOP;
    IF k - 1 <> n THEN
        RAISE EXCEPTION 'the files have % entries, not %', k - 1, n;
    END IF;

    -- Files committed before: their stored answer, nothing else. (One index probe per
    -- key: any statement over all the keys may be planned as a scan of all the cluster's
    -- files when the statistics are stale.)
    skip := array_fill(false, ARRAY[nf]);
    FOR f IN 1..nf LOOP
        skip[f] := EXISTS (SELECT 1 FROM floe_file x
                            WHERE x.cluster_id = p_cluster AND x.key = p_keys[f]);
    END LOOP;
    IF true = ANY(skip) THEN
        RETURN QUERY
        SELECT ff.key::text, ff.commit_errors, ff.commit_offsets,
               coalesce(ff.commit_log_starts, ARRAY(
                   SELECT CASE WHEN coalesce(ff.commit_errors[o], 0) = 0 THEN 0 ELSE -1 END
                     FROM generate_subscripts(ff.commit_offsets, 1) AS o ORDER BY o)),
               ff.commit_duplicates, ff.commit_result
          FROM unnest(p_keys, skip) AS u(key, done)
          CROSS JOIN LATERAL (SELECT * FROM floe_file x
                               WHERE x.cluster_id = p_cluster AND x.key = u.key) ff
         WHERE u.done;
        IF NOT (false = ANY(skip)) THEN
            RETURN;
        END IF;
    END IF;

    -- Lock the partitions in id order (no deadlocks between overlapping commits); number
    -- them, and give every entry its partition's number.
    WITH locked AS MATERIALIZED (
        SELECT id, high_watermark, log_start_offset FROM floe_partition
         WHERE id = ANY(p_part) ORDER BY id FOR UPDATE),
    numbered AS MATERIALIZED (
            SELECT l.id, l.high_watermark, l.log_start_offset, row_number() OVER (ORDER BY l.id) AS num
          FROM locked l)
    SELECT coalesce((SELECT array_agg(m.id ORDER BY m.num) FROM numbered m), '{}'),
           (SELECT array_agg(m.high_watermark ORDER BY m.num) FROM numbered m),
           (SELECT array_agg(m.log_start_offset ORDER BY m.num) FROM numbered m),
           (SELECT array_agg(m.num ORDER BY u.pos) FROM unnest(p_part) WITH ORDINALITY AS u(part, pos)
              LEFT JOIN numbered m ON m.id = u.part),
           (SELECT array_agg(nextval(file_ids)) FROM generate_series(1, nf))
      INTO parts, hws, lsos, place, f_id;
    last_in := array_fill(NULL::int, ARRAY[greatest(cardinality(parts), 1)]);
    run_in := array_fill(NULL::int, ARRAY[greatest(cardinality(parts), 1)]);

    -- KIP-98: the open transactions of the transactional batches' producers, their rows
    -- locked after the partitions (the order ending a transaction takes them).
    IF true = ANY(p_txn) THEN
        tx_pid := ARRAY(SELECT DISTINCT u.pid FROM unnest(p_pid, p_txn) u(pid, txn) WHERE u.txn);
        PERFORM 1 FROM floe_producer_id
          WHERE cluster_id = p_cluster AND id = ANY(tx_pid) ORDER BY id FOR SHARE;
        SELECT array_agg(p.id), array_agg(p.epoch::int), array_agg(p.txn_state::text)
          INTO tx_pid, tx_epoch, tx_state
          FROM floe_producer_id p WHERE p.cluster_id = p_cluster AND p.id = ANY(tx_pid);
        SELECT array_agg(tp.producer_id::text || ':' || tp.partition_id::text) INTO tx_parts
          FROM floe_txn_partition tp WHERE tp.producer_id = ANY(tx_pid);
        tx_pid := coalesce(tx_pid, '{}'); tx_parts := coalesce(tx_parts, '{}');
    END IF;

    -- KIP-98 producer state of the (partition, producer) pairs these files write; the
    -- partition locks above serialize every writer of these rows.
    IF idempotent THEN
        SELECT array_agg(partition_id::text || ':' || producer_id::text), array_agg(partition_id),
               array_agg(producer_id), array_agg(producer_epoch::int), array_agg(last_sequence),
               array_agg(last_offset), array_agg(false)
          INTO st_key, st_part, st_pid, st_epoch, st_seq, st_off, st_dirty
          FROM floe_producer_state
         WHERE partition_id = ANY(parts) AND producer_id = ANY(p_pid)
           AND (partition_id, producer_id) IN (SELECT * FROM unnest(p_part, p_pid) u(a, b) WHERE b >= 0);
    END IF;
    st_key := coalesce(st_key, '{}'); st_part := coalesce(st_part, '{}');
    st_pid := coalesce(st_pid, '{}'); st_epoch := coalesce(st_epoch, '{}');
    st_seq := coalesce(st_seq, '{}'); st_off := coalesce(st_off, '{}');
    st_dirty := coalesce(st_dirty, '{}');

    FOR f IN 1..nf LOOP
        CONTINUE WHEN skip[f];
        FOR i IN f_lo[f]..f_hi[f] LOOP
            IF p_txn[i] THEN
                s := array_position(tx_pid, p_pid[i]);
                IF s IS NULL THEN
                    codes[i] := 49;  -- INVALID_PRODUCER_ID_MAPPING
                    CONTINUE;
                ELSIF p_epoch[i] <> tx_epoch[s] THEN
                    codes[i] := 47;  -- INVALID_PRODUCER_EPOCH
                    CONTINUE;
                ELSIF tx_state[s] <> 'ongoing'
                      OR array_position(tx_parts, p_pid[i]::text || ':' || p_part[i]::text) IS NULL THEN
                    codes[i] := 48;  -- INVALID_TXN_STATE
                    CONTINUE;
                END IF;
            END IF;
            k := place[i];
            IF k IS NULL THEN
                codes[i] := 3;  -- UNKNOWN_TOPIC_OR_PARTITION
                CONTINUE;
            END IF;
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
                        -- One of the producer's last five batches sent again: its original
                        -- offset, from an earlier file of this call or from the stored state.
                        v_dup := NULL;
                        IF st_dirty[s] THEN
                            SELECT u.off INTO v_dup
                              FROM unnest(seq_slot, seq_base, seq_off, seq_ep) WITH ORDINALITY
                                   AS u(slot, seq, off, ep, ord)
                             WHERE u.slot = s AND u.seq = p_seq[i] AND u.ep = p_epoch[i]
                             ORDER BY u.ord DESC LIMIT 1;
                        END IF;
                        IF v_dup IS NULL THEN
                            SELECT ps.recent_offsets[array_position(ps.recent_sequences, p_seq[i])]
                              INTO v_dup FROM floe_producer_state ps
                             WHERE ps.partition_id = p_part[i] AND ps.producer_id = p_pid[i]
                               AND ps.producer_epoch = p_epoch[i];
                        END IF;
                        IF v_dup IS NOT NULL THEN
                            bases[i] := v_dup;  -- a duplicate: stored once
                            starts[i] := lsos[k];
                            dup[i] := 1;
                            IF p_txn[i] THEN
                                tx_w_part := tx_w_part || p_part[i]; tx_w_pid := tx_w_pid || p_pid[i];
                                tx_w_off := tx_w_off || v_dup;
                            END IF;
                        ELSE
                            codes[i] := 45;
                        END IF;
                        CONTINUE;
                    END IF;
                END IF;
            END IF;
            -- (a refused batch's answer carries no log start offset, as Kafka's)
            starts[i] := lsos[k];
            bases[i] := hws[k];
            hws[k] := hws[k] + p_count[i];
            -- A partition's run goes on while its entries follow each other in one file
            -- and in offsets; anything else starts its next run.
            prev := last_in[k];
            IF prev IS NULL OR prev < f_lo[f] OR p_pos[i] <> p_pos[prev] + p_len[prev]
               OR bases[i] <> bases[prev] + p_count[prev] THEN
                r := r + 1;
                run_in[k] := r;
                run_file := run_file || f;
            END IF;
            last_in[k] := i;
            accepted := accepted || i;
            run_of := run_of || run_in[k];
            IF p_txn[i] THEN
                tx_w_part := tx_w_part || p_part[i]; tx_w_pid := tx_w_pid || p_pid[i];
                tx_w_off := tx_w_off || bases[i];
            END IF;
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
                seq_slot := seq_slot || s; seq_base := seq_base || p_seq[i];
                seq_off := seq_off || bases[i]; seq_ep := seq_ep || p_epoch[i];
            END IF;
        END LOOP;
    END LOOP;

    INSERT INTO floe_batch (partition_id, base_offset, last_offset, position, length,
                            record_count, batch_count, max_timestamp, file_id)
    SELECT p_part[min(u.j)], min(bases[u.j]), max(bases[u.j] + p_count[u.j] - 1),
           min(p_pos[u.j]), sum(p_len[u.j]), sum(p_count[u.j]), sum(p_nbatch[u.j]),
           max(p_maxts[u.j]), f_id[run_file[u.run]]
      FROM unnest(accepted, run_of) AS u(j, run) GROUP BY u.run;

    UPDATE floe_partition p SET high_watermark = u.hw
      FROM unnest(parts, hws) AS u(id, hw)
     WHERE p.id = u.id AND p.id = ANY(parts) AND p.high_watermark <> u.hw;

    IF idempotent THEN
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
    END IF;

    IF cardinality(tx_w_part) > 0 THEN
        -- KIP-98: the transaction's first offset in each partition holds the LSO there.
        UPDATE floe_txn_partition tp SET first_offset = w.off
          FROM (SELECT u.part, u.pid, min(u.off) AS off
                  FROM unnest(tx_w_part, tx_w_pid, tx_w_off) AS u(part, pid, off)
                 GROUP BY u.part, u.pid) w
         WHERE tp.partition_id = w.part AND tp.producer_id = w.pid AND tp.first_offset IS NULL;
    END IF;

    -- The files last: a key that a concurrent group (or this one, twice) commits is a
    -- conflict, and then nothing of this call may stay.
    RETURN QUERY
    INSERT INTO floe_file AS ff (id, cluster_id, key, size, level, state, batch_count,
                                 created_at, data_bytes, commit_offsets, commit_errors,
                                 commit_log_starts, commit_duplicates)
    SELECT f_id[g], p_cluster, p_keys[g], p_sizes[g], 0, 'live',
           coalesce((SELECT sum(x) FROM unnest(p_nbatch[f_lo[g]:f_hi[g]]) AS x), 0), now(),
           (SELECT coalesce(sum(p_len[a]), 0) FROM unnest(accepted) AS a
             WHERE a BETWEEN f_lo[g] AND f_hi[g]),
           bases[f_lo[g]:f_hi[g]],
           CASE WHEN 0 < ANY(codes[f_lo[g]:f_hi[g]]) THEN codes[f_lo[g]:f_hi[g]] END,
           CASE WHEN 0 < ANY(starts[f_lo[g]:f_hi[g]]) THEN starts[f_lo[g]:f_hi[g]] END,
           CASE WHEN 1 = ANY(dup[f_lo[g]:f_hi[g]]) THEN
               ARRAY(SELECT d.o::int FROM unnest(dup[f_lo[g]:f_hi[g]]) WITH ORDINALITY AS d(v, o)
                      WHERE d.v = 1 ORDER BY d.o) END
      FROM generate_series(1, nf) AS g WHERE NOT skip[g]
    ON CONFLICT (cluster_id, key) DO NOTHING
    RETURNING ff.key::text, ff.commit_errors, ff.commit_offsets,
              starts[f_lo[array_position(p_keys, ff.key::text)]:f_hi[array_position(p_keys, ff.key::text)]],
              ff.commit_duplicates, NULL::jsonb;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows <> nf - cardinality(array_positions(skip, true)) THEN
        RAISE EXCEPTION 'a file key of this group was committed meanwhile'
              USING ERRCODE = 'unique_violation';
    END IF;
END;
$$;

DROP FUNCTION floe_commit(bigint, text, bigint, bigint[], int[], bigint[], int[], bigint[],
                          bigint[], int[], int[]);
"""

_0007 = importlib.import_module("metadata_store.migrations.0007_committed_bytes")
BACKWARD = (
    "DROP FUNCTION floe_commit_files(bigint, text[], bigint[], int[], bigint[], int[], int[],"
    " bigint[], int[], bigint[], bigint[], int[], int[], bool[]);\n"
    + _0007.FORWARD[_0007.FORWARD.index("CREATE OR REPLACE FUNCTION floe_commit(") :]
    + "\nALTER TABLE floe_file DROP COLUMN commit_offsets, DROP COLUMN commit_errors,"
    " DROP COLUMN commit_log_starts, DROP COLUMN commit_duplicates;\n"
)


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0007_committed_bytes")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="segmentfile",
                    name=name,
                    field=ArrayField(base_field=base, blank=True, null=True, size=None),
                )
                for name, base in [
                    ("commit_offsets", models.BigIntegerField()),
                    ("commit_errors", models.IntegerField()),
                    ("commit_log_starts", models.BigIntegerField()),
                    ("commit_duplicates", models.IntegerField()),
                ]
            ],
        )
    ]
