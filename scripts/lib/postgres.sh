# Shared by scripts/test and scripts/bench (sourced, not run): finding or starting PostgreSQL and
# making a fresh database that is dropped when the script exits. PostgreSQL is found at
# PGHOST/PGPORT/PGUSER (default 127.0.0.1:5432, user postgres).

export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"

say() { printf '==> %s\n' "$*" >&2; }

postgres_up() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$PGHOST" -p "$PGPORT" -t 2
  else
    (exec 3<>"/dev/tcp/$PGHOST/$PGPORT") 2>/dev/null
  fi
}

# start_postgres starts the local clusters if PostgreSQL is installed but stopped.
start_postgres() {
  postgres_up && return 0
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    say "starting PostgreSQL"
    for version in $(ls /etc/postgresql); do
      pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
    done
    for _ in $(seq 1 30); do postgres_up && return 0; sleep 1; done
  fi
  return 1
}

fresh_databases=()
drop_fresh_databases() {
  # The +-form keeps `set -u` quiet about an empty array on bash before 4.4.
  for db in ${fresh_databases[@]+"${fresh_databases[@]}"}; do
    psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
}
trap drop_fresh_databases EXIT

# fresh_database PREFIX creates an empty database, dropped on exit, and sets fresh_db (its name)
# and fresh_url (its URL). Call it in the script's own shell, not in $(...), so the drop happens.
fresh_database() {
  fresh_db="$1_$(date +%s)_$$_${#fresh_databases[@]}"
  psql -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE \"$fresh_db\"" >/dev/null
  fresh_databases+=("$fresh_db")
  fresh_url="postgres://$PGUSER@$PGHOST:$PGPORT/$fresh_db?sslmode=disable"
}

# postmaster_pid prints the PID of the PostgreSQL server at PGHOST/PGPORT when it runs on this
# machine (its data directory's postmaster.pid is readable), for cmd/loadtest -postmaster: the
# CPU counted as PostgreSQL's is then that server's alone, not every postgres process's. Prints
# nothing otherwise.
postmaster_pid() {
  local dir
  dir=$(psql -XAt -d postgres -c 'SHOW data_directory' 2>/dev/null) || return 0
  head -1 "$dir/postmaster.pid" 2>/dev/null || true
}
