#!/bin/sh
# Patroni's post_bootstrap: the first primary is up; Patroni passes a connection string.
# Creates Floe's role and database (FLOE_DB_PASSWORD) once for the whole cluster.
set -eu
psql "$1" -v ON_ERROR_STOP=1 -v pw="${FLOE_DB_PASSWORD:?}" <<'SQL'
CREATE ROLE floe LOGIN PASSWORD :'pw';
CREATE DATABASE floe OWNER floe;
SQL
