#!/bin/sh
# Patroni's replica creation method `barman_cloud` (postgresql.create_replica_methods): a
# member whose data folder is empty is rebuilt from the latest base backup in the bucket
# plus the WAL archived since (fetch_archived_wal.py puts it into pg_wal/); Patroni then
# starts it as a standby, which replays that WAL and streams the rest from the leader.
# Standbys have no restore_command (a promotion would wait on the archive). Patroni calls
# it with --scope=… --role=… --datadir=… --connstring=…; the bucket comes from the
# environment Patroni runs in:
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
limit="${FLOE_BACKUP_RESTORE_TIMEOUT:-600}"
timeout "$limit" barman-cloud-restore "$@" "$FLOE_BACKUP_URL" "$FLOE_BACKUP_SERVER" latest "$datadir"
# barman-cloud-restore's own interpreter (barman's library is installed beside it).
python="$(dirname "$(command -v barman-cloud-restore)")/python3"
exec timeout "$limit" "$python" "$(dirname "$0")/fetch_archived_wal.py" "$datadir"
