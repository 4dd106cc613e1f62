"""The commit transaction as one server-side function (the metadata store's own copy).

``virtualclusters.0002`` first created it, when the store lived in that app; this
replaces it with the same text, and every later change to the commit is a migration of
this app.

Commits lock partition rows; doing the whole commit in one call means those locks are
held only for the function's own work and the COMMIT, never across client round trips.
That is what lets many agents commit to overlapping partitions at once.
"""

from django.db import migrations

COMMIT_FUNCTION = r"""
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
    i int; k int; s int; v_dup bigint; v_key text;
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
                    SELECT b.base_offset INTO v_dup FROM floe_batch b
                     WHERE b.partition_id = p_part[i] AND b.producer_id = p_pid[i]
                       AND b.producer_epoch = p_epoch[i] AND b.base_sequence = p_seq[i]
                     ORDER BY b.last_offset DESC LIMIT 1;
                    IF FOUND THEN
                        bases[i] := v_dup;  -- a duplicate: its original offset, stored once
                    ELSE
                        codes[i] := 45;
                    END IF;
                    CONTINUE;
                END IF;
            END IF;
        END IF;
        bases[i] := hws[k];
        hws[k] := hws[k] + p_count[i];
        accepted := accepted || i;
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
        END IF;
    END LOOP;

    INSERT INTO floe_batch (partition_id, base_offset, last_offset, position, length,
                            record_count, max_timestamp, producer_id, producer_epoch,
                            base_sequence, file_id)
    SELECT p_part[j], bases[j], bases[j] + p_count[j] - 1, p_pos[j], p_len[j], p_count[j],
           p_maxts[j], p_pid[j], p_epoch[j], p_seq[j], v_file
      FROM unnest(accepted) AS j;

    UPDATE floe_partition p SET high_watermark = u.hw
      FROM unnest(parts, hws) AS u(id, hw)
     WHERE p.id = u.id AND p.high_watermark <> u.hw;

    INSERT INTO floe_producer_state (partition_id, producer_id, producer_epoch, last_sequence,
                                     last_offset, updated_at)
    SELECT st_part[j], st_pid[j], st_epoch[j], st_seq[j], st_off[j], now()
      FROM generate_subscripts(st_key, 1) AS j WHERE st_dirty[j]
    ON CONFLICT (partition_id, producer_id) DO UPDATE SET
        producer_epoch = EXCLUDED.producer_epoch, last_sequence = EXCLUDED.last_sequence,
        last_offset = EXCLUDED.last_offset, updated_at = now();

    SELECT coalesce(jsonb_agg(jsonb_build_object('error_code', codes[j], 'base_offset', bases[j],
                                                 'log_start_offset', starts[j]) ORDER BY j), '[]')
      INTO v_result FROM generate_series(1, n) AS j;
    UPDATE floe_file SET commit_result = v_result WHERE id = v_file;
    RETURN v_result;
END;
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0001_initial")]

    operations = [
        migrations.RunSQL(
            COMMIT_FUNCTION,
            reverse_sql=migrations.RunSQL.noop,  # virtualclusters.0002 made it; it stays
        )
    ]
