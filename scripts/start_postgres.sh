#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for Dagster's instance storage (deploy/postgres/dagster.yaml):
# a fresh cluster in DIR (default: a new temp dir), listening on 127.0.0.1 only, on PORT (default:
# a free one). Prints the DAGSTER_PG_* exports on stdout; stop it with
# `pg_ctl -D DIR/data stop` (as the user that owns DIR when run as root).
# Uses Debian's postgresql package (/usr/lib/postgresql/*/bin). As root, initdb refuses to run,
# so the server runs as the unprivileged `postgres` user instead.
set -euo pipefail
DIR=${1:-$(mktemp -d /tmp/dagster-pg.XXXXXX)}
PORT=${2:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
DB=${DAGSTER_PG_DB:-dagster}
PGUSER_NAME=${DAGSTER_PG_USER:-dagster}
PASSWORD=${DAGSTER_PG_PASSWORD:-$(python3 -c 'import secrets; print(secrets.token_hex(12))')}

BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$BIN" ] && command -v initdb >/dev/null; then BIN=$(dirname "$(command -v initdb)"); fi
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  echo "no PostgreSQL server binaries (Debian: apt-get install postgresql)" >&2; exit 2
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "running as root and no unprivileged 'postgres' user to run the server" >&2; exit 2
  fi
  as_owner=(runuser -u postgres --)
fi

mkdir -p "$DIR"
chmod 755 "$DIR"
printf '%s\n' "$PASSWORD" > "$DIR/pwfile"
if [ ${#as_owner[@]} -gt 0 ]; then chown -R postgres: "$DIR"; fi
chmod 600 "$DIR/pwfile"

# Password (scram) authentication over TCP, as a real deployment has; the unix socket sits in
# DIR, not /var/run/postgresql, so no system directory is touched.
"${as_owner[@]}" "$BIN/initdb" -D "$DIR/data" -U "$PGUSER_NAME" --pwfile="$DIR/pwfile" \
  --auth-host=scram-sha-256 --auth-local=trust -E UTF8 >"$DIR/initdb.log" 2>&1 \
  || { cat "$DIR/initdb.log" >&2; exit 1; }
"${as_owner[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR" start >/dev/null \
  || { cat "$DIR/server.log" >&2; exit 1; }
"${as_owner[@]}" "$BIN/createdb" -h "$DIR" -p "$PORT" -U "$PGUSER_NAME" "$DB"

cat <<OUT
export DAGSTER_PG_HOST=127.0.0.1
export DAGSTER_PG_PORT=$PORT
export DAGSTER_PG_USER=$PGUSER_NAME
export DAGSTER_PG_PASSWORD=$PASSWORD
export DAGSTER_PG_DB=$DB
export DAGSTER_PG_DATA=$DIR/data
export DAGSTER_PG_BIN=$BIN
OUT
