#!/bin/sh
# What deploy/compose.core.yml uses of the postgres image's entrypoint: on the first start (an empty
# $PGDATA), create the cluster with POSTGRES_USER as superuser, its password from
# POSTGRES_PASSWORD_FILE (or POSTGRES_PASSWORD), password logins over TCP, and POSTGRES_DB; then run
# the server. A missing password or an unreadable file stops the start, naming the variable.
set -eu
PGDATA=${PGDATA:-/var/lib/postgresql/data}

if [ "${1:-postgres}" = postgres ]; then
  [ $# -gt 0 ] && shift
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    user=${POSTGRES_USER:-postgres}
    if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
      if [ ! -r "$POSTGRES_PASSWORD_FILE" ]; then
        echo "postgres: cannot read POSTGRES_PASSWORD_FILE=$POSTGRES_PASSWORD_FILE" >&2
        exit 1
      fi
      password=$(cat "$POSTGRES_PASSWORD_FILE")
    else
      password=${POSTGRES_PASSWORD:-}
    fi
    if [ -z "$password" ]; then
      echo "postgres: the first start needs a password: set POSTGRES_PASSWORD_FILE (or POSTGRES_PASSWORD)" >&2
      exit 1
    fi
    pwfile=$(mktemp)
    printf '%s\n' "$password" >"$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
      --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    database=${POSTGRES_DB:-$user}
    if [ "$database" != postgres ]; then
      echo "CREATE DATABASE \"$database\" OWNER \"$user\"" | postgres --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "postgres: initialised $PGDATA (user $user, database $database)"
  fi
  set -- postgres -D "$PGDATA" "$@"
fi
exec "$@"
