"""Issue 38: migrations' and job runs' leases move to the metadata store's lease table
(`floe_lease`: holder, epoch, token, expiry on the database's clock). Leases held at the
upgrade are carried over with their tokens and expiries, so their holders go on."""

from django.db import migrations

CARRY_OVER = (
    "INSERT INTO floe_lease (cluster_id, subject, holder, epoch, token, expires_at)"
    " SELECT cluster_id, 'job ' || public_id, lease_agent, GREATEST(attempts, 1), lease_token,"
    " COALESCE(lease_expires_at, now()) FROM floe_job_run"
    " WHERE state = 'running' AND lease_token <> '' ON CONFLICT DO NOTHING",
    "INSERT INTO floe_lease (cluster_id, subject, holder, epoch, token, expires_at)"
    " SELECT cluster_id, 'migration ' || public_id, lease_agent, 1, lease_token,"
    " COALESCE(lease_expires_at, now()) FROM floe_migration"
    " WHERE state = 'running' AND lease_token <> '' ON CONFLICT DO NOTHING",
)


class Migration(migrations.Migration):
    dependencies = [
        ("virtualclusters", "0015_consumer_group_reports"),
        ("metadata_store", "0018_leases_and_group_use"),
    ]

    operations = [
        migrations.RunSQL(CARRY_OVER, migrations.RunSQL.noop),
        migrations.RemoveField(model_name="migration", name="lease_expires_at"),
        migrations.RemoveField(model_name="migration", name="lease_token"),
        migrations.RemoveField(model_name="jobrun", name="lease_expires_at"),
    ]
