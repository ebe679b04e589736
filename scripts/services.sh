#!/usr/bin/env bash
# Brings up what the tests need, only what is missing: Redis on 127.0.0.1:6379,
# PostgreSQL on 127.0.0.1:5432 with the pgvector extension (built from Debian's
# trixie source package when absent), nginx (installed, not started),
# Chromium (for the browser tests), and the test database `runnel_test`.
# Idempotent and quick when everything already runs. Called by `npm test`.
set -euo pipefail

log() { echo "[services] $*" >&2; }
PGHOST=127.0.0.1
PGPORT=5432
PGUSER=${PGUSER:-postgres}
export PGHOST PGPORT PGUSER
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # wait_for "description" command...
  local what=$1; shift
  for _ in $(seq 1 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "$what did not come up"; return 1
}

# --- Redis ---------------------------------------------------------------------------------------------------
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  command -v redis-server >/dev/null || apt_install redis-server
  log "starting redis-server"
  mkdir -p /tmp/runnel-redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp/runnel-redis --logfile /tmp/runnel-redis/redis.log
  wait_for "redis" redis-cli -h 127.0.0.1 -p 6379 ping
fi

# --- PostgreSQL ------------------------------------------------------------------------------------------------
if ! pg_isready -h "$PGHOST" -p "$PGPORT" -q 2>/dev/null; then
  if [ ! -d /etc/postgresql ] || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then apt_install postgresql; fi
  version=$(ls /etc/postgresql | sort -n | tail -1)
  log "starting PostgreSQL $version"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for "postgres" pg_isready -h "$PGHOST" -p "$PGPORT" -q
fi
major=$(psql -tAc "show server_version_num" | cut -c1-2)

# --- pgvector --------------------------------------------------------------------------------------------------
if [ "$(psql -tAc "select count(*) from pg_available_extensions where name = 'vector'")" != "1" ]; then
  log "building pgvector for PostgreSQL $major from Debian's trixie source package"
  if ! grep -rqs "trixie" /etc/apt/sources.list.d/runnel-trixie-src.sources; then
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\n' | $SUDO tee /etc/apt/sources.list.d/runnel-trixie-src.sources >/dev/null
    APT_UPDATED=""
  fi
  apt_install dpkg-dev build-essential "postgresql-server-dev-$major"
  build=$(mktemp -d)
  (cd "$build" && apt-get source -qq pgvector >/dev/null 2>&1)
  src=$(find "$build" -maxdepth 1 -type d -name 'pgvector-*' | head -1)
  make -s -C "$src" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" >/dev/null
  $SUDO make -s -C "$src" install PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" >/dev/null
  rm -rf "$build"
fi

# --- nginx (the multi-replica test runs its own instance on spare ports with deploy/nginx.conf) --------------
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  log "installing nginx"
  apt_install nginx-light || apt_install nginx
fi

# --- Chromium (the playground's browser tests drive Debian's build; never a downloaded one) ---------------------
if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium"
  apt_install chromium
fi

# --- the test database -----------------------------------------------------------------------------------------
if [ "$(psql -tAc "select count(*) from pg_database where datname = 'runnel_test'")" != "1" ]; then
  log "creating database runnel_test"
  createdb runnel_test
fi
psql -q -d runnel_test -c 'set client_min_messages = warning; create extension if not exists vector' >/dev/null
log "redis and postgres (with pgvector $(psql -tAc "select extversion from pg_extension where extname = 'vector'" -d runnel_test)) are up"
