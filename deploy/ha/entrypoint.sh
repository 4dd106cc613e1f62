#!/bin/sh
# A metadata PostgreSQL node of docker-compose.yml: Patroni (which runs PostgreSQL) and,
# beside it, a base backup to the bucket every FLOE_BACKUP_INTERVAL seconds (default a
# day) taken by whichever node is the primary then — barman-cloud-backup reads the data
# folder, so it runs on the primary's own machine — and backups past
# FLOE_BACKUP_RETENTION ("RECOVERY WINDOW OF 7 DAYS") deleted with the WAL only they need.
set -eu
export PATH="/opt/floe-ha/bin:$PATH"
cloud="--cloud-provider aws-s3 --endpoint-url ${FLOE_BACKUP_ENDPOINT}"
(
  sleep 60
  while true; do
    if curl -fsS -o /dev/null http://127.0.0.1:8008/primary; then
      timeout 3600 barman-cloud-backup $cloud --immediate-checkpoint -h /var/run/postgresql \
        -U postgres "$FLOE_BACKUP_URL" floe-metadata \
      && timeout 600 barman-cloud-backup-delete $cloud \
        --retention-policy "${FLOE_BACKUP_RETENTION:-RECOVERY WINDOW OF 7 DAYS}" \
        "$FLOE_BACKUP_URL" floe-metadata \
      || echo "base backup failed; next try in ${FLOE_BACKUP_INTERVAL:-86400} s" >&2
    fi
    sleep "${FLOE_BACKUP_INTERVAL:-86400}"
  done
) &
exec patroni /opt/floe-ha/patroni.yml
