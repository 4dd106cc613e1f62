"""The database's own guard on offsets, behind the agent-API validation.

CHECK constraints make a negative offset, a batch without records or crossed
watermarks impossible; a trigger refuses any update that moves a high watermark or a log
start offset back. They are added NOT VALID: they hold for every write from now on, and
an upgrade never fails on rows an earlier version let through.
"""

import django.db.models.expressions
from django.db import migrations, models

FORWARD = """
ALTER TABLE floe_batch ADD CONSTRAINT batch_offsets_and_bytes_valid CHECK (
    base_offset >= 0 AND record_count >= 1 AND last_offset >= base_offset + record_count - 1
    AND position >= 0 AND length > 0) NOT VALID;
ALTER TABLE floe_partition ADD CONSTRAINT partition_offsets_ordered CHECK (
    log_start_offset >= 0 AND high_watermark >= log_start_offset) NOT VALID;

CREATE FUNCTION floe_refuse_offsets_backwards() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'partition %: offsets never move back (high watermark % -> %, log start % -> %)',
        OLD.id, OLD.high_watermark, NEW.high_watermark, OLD.log_start_offset, NEW.log_start_offset
        USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER floe_partition_offsets_forward
    BEFORE UPDATE OF high_watermark, log_start_offset ON floe_partition FOR EACH ROW
    WHEN (NEW.high_watermark < OLD.high_watermark OR NEW.log_start_offset < OLD.log_start_offset)
    EXECUTE FUNCTION floe_refuse_offsets_backwards();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS floe_partition_offsets_forward ON floe_partition;
DROP FUNCTION IF EXISTS floe_refuse_offsets_backwards();
ALTER TABLE floe_partition DROP CONSTRAINT IF EXISTS partition_offsets_ordered;
ALTER TABLE floe_batch DROP CONSTRAINT IF EXISTS batch_offsets_and_bytes_valid;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0005_jobrun"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.AddConstraint(
                    model_name="batch",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("base_offset__gte", 0),
                            ("record_count__gte", 1),
                            (
                                "last_offset__gte",
                                django.db.models.expressions.CombinedExpression(
                                    django.db.models.expressions.CombinedExpression(
                                        models.F("base_offset"), "+", models.F("record_count")
                                    ),
                                    "-",
                                    models.Value(1),
                                ),
                            ),
                            ("position__gte", 0),
                            ("length__gt", 0),
                        ),
                        name="batch_offsets_and_bytes_valid",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="partition",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("log_start_offset__gte", 0),
                            ("high_watermark__gte", models.F("log_start_offset")),
                        ),
                        name="partition_offsets_ordered",
                    ),
                ),
            ],
        )
    ]
