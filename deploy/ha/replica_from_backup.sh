#!/bin/sh
# Patroni's replica creation method `barman_cloud` (postgresql.create_replica_methods): a
# member whose data folder is empty is rebuilt from the latest base backup in the bucket;
# Patroni then starts it as a standby whose restore_command replays the archived WAL until
# it can stream from the leader. Patroni calls it with --scope=… --role=… --datadir=…
# --connstring=…; the bucket comes from the environment Patroni runs in:
#   FLOE_BACKUP_URL     s3://bucket/prefix
#   FLOE_BACKUP_SERVER  the server name the backups and WAL are filed under
#   FLOE_BACKUP_ENDPOINT  (optional) an S3-compatible endpoint (MinIO, moto)
# A failure (no backup yet, the bucket unreachable) exits non-zero: Patroni falls back to
# the next method (basebackup).
set -eu
datadir=""
for arg in "$@"; do
  case "$arg" in
    --datadir=*) datadir="${arg#--datadir=}" ;;
  esac
done
[ -n "$datadir" ] || { echo "replica_from_backup: no --datadir" >&2; exit 2; }
set -- --cloud-provider aws-s3
[ -n "${FLOE_BACKUP_ENDPOINT:-}" ] && set -- "$@" --endpoint-url "$FLOE_BACKUP_ENDPOINT"
exec timeout "${FLOE_BACKUP_RESTORE_TIMEOUT:-600}" barman-cloud-restore "$@" \
  "$FLOE_BACKUP_URL" "$FLOE_BACKUP_SERVER" latest "$datadir"
