"""Mirrored partitions (issue 30, offset-preserving migration): a topic copied from
another Kafka keeps the source's offsets, so while it is mirrored only the migration's
commits (``metadata_store.mirroring``) may move its partitions' high watermarks.

``floe_partition.mirrored`` marks them; a trigger refuses any other update that moves a
mirrored partition's high watermark — the normal commit (``floe_commit_files``), a
transaction marker — unless the transaction said it is a mirrored commit
(``SET LOCAL floe.mirror = 'on'``). The agents refuse produce to a mirrored topic before
writing anything (the topic's ``mirrored_by`` names the migration); the trigger is the
store's own guarantee behind that, for an agent whose topic metadata is a few seconds
stale. Its WHEN clause is all an ordinary commit pays (the partition is not mirrored).
"""

from django.db import migrations, models

FORWARD = r"""
CREATE FUNCTION floe_partition_mirrored_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'partition % is mirrored by a migration: only its commits move the high watermark', NEW.id
          USING ERRCODE = 'check_violation';
END
$$;
CREATE TRIGGER floe_partition_mirrored BEFORE UPDATE OF high_watermark ON floe_partition
    FOR EACH ROW WHEN (NEW.mirrored AND NEW.high_watermark <> OLD.high_watermark
                       AND current_setting('floe.mirror', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION floe_partition_mirrored_refuse();
"""

BACKWARD = r"""
DROP TRIGGER floe_partition_mirrored ON floe_partition;
DROP FUNCTION floe_partition_mirrored_refuse();
"""


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0015_broker_configs")]

    operations = [
        migrations.AddField(
            model_name="topic",
            name="mirrored_by",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(
            model_name="partition",
            name="mirrored",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunSQL(FORWARD, reverse_sql=BACKWARD),
    ]
