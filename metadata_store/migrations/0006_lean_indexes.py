"""The hottest tables keep only the indexes their queries use: every index of floe_batch
costs on each commit's insert of its runs.

- floe_batch: its primary key (partition_id, last_offset) serves lookups by partition,
  and batch_file_idx those by file; Django's own indexes of the two foreign keys (one a
  twin of batch_file_idx) go.
- floe_file: file_key_unique (cluster_id, key) and file_state_idx (cluster_id, state,
  level) lead with the cluster; the foreign key's own index goes.

The models' fields say ``db_index=False``; the tables are the migrations' RunSQL's, so
the indexes are dropped here by name (as Django named them when it made them).
"""

from django.db import migrations, models

FORWARD = """
DROP INDEX IF EXISTS floe_batch_file_id_b1814204;
DROP INDEX IF EXISTS floe_batch_partition_id_0f19cb55;
DROP INDEX IF EXISTS floe_file_cluster_id_8659c311;
"""

BACKWARD = """
CREATE INDEX IF NOT EXISTS floe_batch_file_id_b1814204 ON floe_batch (file_id);
CREATE INDEX IF NOT EXISTS floe_batch_partition_id_0f19cb55 ON floe_batch (partition_id);
CREATE INDEX IF NOT EXISTS floe_file_cluster_id_8659c311 ON floe_file (cluster_id);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("metadata_store", "0005_transactions"),
        ("virtualclusters", "0010_throughput_out"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.AlterField(
                    model_name="batch",
                    name="file",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        to="metadata_store.segmentfile",
                    ),
                ),
                migrations.AlterField(
                    model_name="batch",
                    name="partition",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        to="metadata_store.partition",
                    ),
                ),
                migrations.AlterField(
                    model_name="segmentfile",
                    name="cluster",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="files",
                        to="virtualclusters.virtualcluster",
                    ),
                ),
            ],
        )
    ]
