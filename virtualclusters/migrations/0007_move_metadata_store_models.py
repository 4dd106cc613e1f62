"""The metadata store's models moved to the ``metadata_store`` app.

State only: the tables (``floe_*``) and their rows stay exactly where they are;
``metadata_store.0001_initial`` takes the same models into its state.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0006_offset_checks"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="batch",
                    name="file",
                ),
                migrations.RemoveField(
                    model_name="batch",
                    name="partition",
                ),
                migrations.RemoveField(
                    model_name="groupoffset",
                    name="cluster",
                ),
                migrations.RemoveField(
                    model_name="groupoffset",
                    name="partition",
                ),
                migrations.RemoveField(
                    model_name="partition",
                    name="topic",
                ),
                migrations.RemoveField(
                    model_name="producerstate",
                    name="partition",
                ),
                migrations.RemoveField(
                    model_name="producerid",
                    name="cluster",
                ),
                migrations.RemoveField(
                    model_name="segmentfile",
                    name="cluster",
                ),
                migrations.RemoveField(
                    model_name="topic",
                    name="cluster",
                ),
                migrations.DeleteModel(
                    name="Agent",
                ),
                migrations.DeleteModel(
                    name="Batch",
                ),
                migrations.DeleteModel(
                    name="GroupOffset",
                ),
                migrations.DeleteModel(
                    name="Partition",
                ),
                migrations.DeleteModel(
                    name="ProducerState",
                ),
                migrations.DeleteModel(
                    name="ProducerId",
                ),
                migrations.DeleteModel(
                    name="SegmentFile",
                ),
                migrations.DeleteModel(
                    name="Topic",
                ),
            ],
        )
    ]
