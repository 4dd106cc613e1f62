#!/bin/sh
# A metadata PostgreSQL node of docker-compose.yml: Patroni (which runs PostgreSQL), the
# failure detector and, beside them, a base backup to the bucket every
# FLOE_BACKUP_INTERVAL seconds (default a day) taken by whichever node is the primary
# then — barman-cloud-backup reads the data folder, so it runs on the primary's own
# machine — and backups past FLOE_BACKUP_RETENTION ("RECOVERY WINDOW OF 7 DAYS") deleted
# with the WAL only they need.
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
# The failure detector (deploy/ha/failure_detector.py): with the others', it deletes the
# leader key of a primary whose Patroni and PostgreSQL both refuse connections, so the
# synchronous standby takes over in seconds instead of after the key's ttl (20 s).
python /opt/floe-ha/failure_detector.py /opt/floe-ha/patroni.yml &
# Patroni, started again should it die, as a machine's service manager would: the
# container (the machine) outlives it, so its ports refuse connections (what the detectors
# look for) instead of its address vanishing, and the node rejoins by itself (as a
# standby, with pg_rewind, if another node took over meanwhile). `docker compose stop`
# reaches Patroni, which stops PostgreSQL and hands over cleanly.
patroni_pid=
stop() {
  kill -TERM "$patroni_pid" 2>/dev/null || true
  wait "$patroni_pid" || true
  exit 0
}
trap stop TERM INT
while true; do
  patroni /opt/floe-ha/patroni.yml &
  patroni_pid=$!
  wait "$patroni_pid" || true
  echo "patroni exited; starting it again in 5 s" >&2
  sleep 5
done
