# Shared by scripts/test (sourced, not run): a PgBouncer in transaction-pooling mode in front of
# the PostgreSQL of scripts/lib/postgres.sh, the way fleets of instances share one primary.
# start_pgbouncer installs Debian's pgbouncer when it is missing (as root), starts it on a free
# port with a configuration of its own in a temporary folder, and sets pgbouncer_port; it returns
# non-zero when it cannot. The pooler is stopped when the script exits.

pgbouncer_dir=""
stop_pgbouncer() {
  if [ -n "$pgbouncer_dir" ] && [ -f "$pgbouncer_dir/pgbouncer.pid" ]; then
    kill "$(cat "$pgbouncer_dir/pgbouncer.pid")" 2>/dev/null || true
  fi
  [ -n "$pgbouncer_dir" ] && rm -rf "$pgbouncer_dir"
  return 0
}

free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  return 1
}

start_pgbouncer() {
  local bin
  bin=$(command -v pgbouncer || ls /usr/sbin/pgbouncer 2>/dev/null || true)
  if [ -z "$bin" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing pgbouncer"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null || return 1
    # The package starts a service of its own on 6432; this script runs its own.
    service pgbouncer stop >/dev/null 2>&1 || true
    bin=/usr/sbin/pgbouncer
  fi
  [ -x "$bin" ] || return 1
  pgbouncer_port=$(free_port) || return 1
  pgbouncer_dir=$(mktemp -d)
  # Every role the tests make logs in without a password (the server trusts local connections);
  # PgBouncer learns the roles through auth_query, as the postgres role. Small pools, closed when
  # idle, because each test's role has a pool of its own (internal/testdb).
  cat > "$pgbouncer_dir/pgbouncer.ini" <<INI
[databases]
* = host=$PGHOST port=$PGPORT
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pgbouncer_port
unix_socket_dir =
pool_mode = transaction
auth_type = hba
auth_hba_file = $pgbouncer_dir/hba.conf
auth_file = $pgbouncer_dir/users.txt
auth_user = $PGUSER
default_pool_size = 3
max_db_connections = 40
server_idle_timeout = 1
max_client_conn = 2000
ignore_startup_parameters = extra_float_digits
logfile = $pgbouncer_dir/pgbouncer.log
pidfile = $pgbouncer_dir/pgbouncer.pid
INI
  echo "host all all 127.0.0.1/32 trust" > "$pgbouncer_dir/hba.conf"
  echo "\"$PGUSER\" \"\"" > "$pgbouncer_dir/users.txt"
  # PgBouncer will not run as root.
  if [ "$(id -u)" = 0 ]; then
    chown -R postgres "$pgbouncer_dir" 2>/dev/null || return 1
    runuser -u postgres -- "$bin" -d "$pgbouncer_dir/pgbouncer.ini" >/dev/null || return 1
  else
    "$bin" -d "$pgbouncer_dir/pgbouncer.ini" >/dev/null || return 1
  fi
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$pgbouncer_port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
