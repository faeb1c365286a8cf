#!/usr/bin/env bash
# A throwaway PostgreSQL server for development and tests.
#
#   scripts/postgres.sh start DIR PORT   start it (initialising DIR on first use)
#   scripts/postgres.sh stop DIR         stop it
#   scripts/postgres.sh status DIR       say whether it runs (exit 0) or not (exit 3)
#   scripts/postgres.sh url DIR [PORT]   print its admin URL
#   scripts/postgres.sh bin              print the PostgreSQL bin directory
#
# DIR holds the cluster (DIR/data), its log (DIR/log) and its unix socket
# (DIR/.s.PGSQL.PORT). The server listens on 127.0.0.1:PORT only and trusts
# every connection (no passwords): the superuser is `postgres`, and the admin
# URL is postgresql://postgres@127.0.0.1:PORT/postgres, which psql, pg_dump,
# pg_restore and tokio-postgres all accept. `start` and `stop` are idempotent;
# `start` returns once the server accepts connections, and a restart keeps the
# data. `rm -rf DIR` (after `stop`) throws it away.
#
# initdb and pg_ctl refuse to run as root, so as root the server runs as the
# system user navique-pg (created when missing), which owns DIR; DIR's parents
# must be searchable by it (/tmp, /work/... are). As any other user it runs as
# that user. The binaries are Debian's /usr/lib/postgresql/<version>/bin (or
# those of an initdb on PATH); when there are none, the `postgresql` package
# is installed. Debian may start its own cluster on 5432; this one is separate.
# pg_dump, pg_restore and psql are in the directory `bin` prints.
set -euo pipefail

superuser=postgres
pg_user=navique-pg

die() { echo "postgres: $*" >&2; exit 1; }
usage() { { echo "usage:"; sed -n "4,8s/^#  //p" "$0"; } >&2; exit 2; }

# The directory holding initdb, pg_ctl, pg_isready, psql, pg_dump, pg_restore.
find_bindir() {
  local initdb dir
  if initdb=$(command -v initdb 2>/dev/null); then
    dir=$(dirname "$(readlink -f "$initdb")")
    if [[ -x $dir/pg_ctl && -x $dir/postgres ]]; then echo "$dir"; return 0; fi
  fi
  # The newest version Debian has installed.
  while read -r dir; do
    if [[ -x $dir/initdb && -x $dir/pg_ctl ]]; then echo "$dir"; return 0; fi
  done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r)
  return 1
}

apt_install() {
  [[ $(id -u) -eq 0 ]] ||
    die "missing $*; install them (apt-get install $*) or run as root"
  echo "postgres: installing $*" >&2
  apt-get update -qq >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null ||
    die "apt-get install $* failed"
}

ensure_bindir() {
  bindir=$(find_bindir) && return 0
  apt_install postgresql
  bindir=$(find_bindir) || die "installed postgresql but found no initdb under /usr/lib/postgresql/*/bin"
}

# Runs a command as the user who owns the cluster, from DIR (so that the
# unprivileged user is never left in a folder it cannot read, like /root).
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then
    (cd "$dir" && runuser -u "$pg_user" -- "$@")
  else
    (cd "$dir" && "$@")
  fi
}

ensure_pg_user() {
  [[ $(id -u) -eq 0 ]] || return 0
  id "$pg_user" >/dev/null 2>&1 && return 0
  command -v useradd >/dev/null || apt_install passwd
  command -v runuser >/dev/null || apt_install util-linux
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$pg_user" 2>/dev/null ||
    id "$pg_user" >/dev/null 2>&1 || die "could not create the system user $pg_user"
}

# Sets $dir to the absolute form of $1, rejecting characters that pg_ctl's
# option string or the server's configuration would need quoted.
set_dir() {
  [[ -n $1 ]] || usage
  [[ $1 =~ ^[A-Za-z0-9._/+-]+$ ]] ||
    die "DIR may hold only letters, digits and ._/+- (got '$1')"
  case $1 in
    /*) dir=$1 ;;
    *) dir=$(pwd)/$1 ;;
  esac
  dir=${dir%/}
  data=$dir/data
}

check_port() {
  if ! [[ $1 =~ ^[1-9][0-9]{0,4}$ ]] || (($1 > 65535)); then
    die "PORT must be 1-65535 (got '$1')"
  fi
}

# The port in a running cluster's postmaster.pid (its fourth line).
running_port() { sed -n 4p "$data/postmaster.pid" 2>/dev/null; }

is_running() {
  [[ -f $data/PG_VERSION ]] || return 1
  as_pg "$bindir/pg_ctl" status -D "$data" >/dev/null 2>&1
}

start() {
  local port=$1
  check_port "$port"
  ensure_bindir
  ensure_pg_user
  # The server's unix socket path must fit in sockaddr_un (107 bytes).
  local socket=$dir/.s.PGSQL.$port
  ((${#socket} <= 107)) || die "DIR is too long for a unix socket path ($socket); pick a shorter DIR"

  mkdir -p "$dir"
  if [[ $(id -u) -eq 0 ]]; then
    chown "$pg_user:" "$dir"
    chmod 0755 "$dir"
    [[ -e $data ]] && chown -R "$pg_user:" "$data"
    [[ -e $dir/log ]] && chown "$pg_user:" "$dir/log"
    as_pg test -w "$dir" 2>/dev/null ||
      die "$pg_user cannot reach $dir: one of its parents is not searchable by others (chmod o+x it or pick a DIR under /tmp)"
  fi

  if is_running; then
    local running
    running=$(running_port)
    [[ $running == "$port" ]] ||
      die "the server in $dir already runs on port ${running:-?}, not $port; stop it first"
    echo "postgres: already running in $dir on 127.0.0.1:$port"
    return 0
  fi

  if [[ ! -f $data/PG_VERSION ]]; then
    # A data folder without PG_VERSION is what an interrupted initdb leaves.
    rm -rf "$data"
    echo "postgres: initialising $data (superuser $superuser, trust authentication)"
    as_pg "$bindir/initdb" -D "$data" -U "$superuser" -A trust \
      --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
      die "initdb failed; see $dir/initdb.log: $(tail -n 5 "$dir/initdb.log")"
  fi

  if ! as_pg "$bindir/pg_ctl" -D "$data" -l "$dir/log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null; then
    die "the server did not start; the end of $dir/log:
$(tail -n 10 "$dir/log" 2>/dev/null)"
  fi

  # pg_ctl -w already waits for the server; this checks the TCP listener too.
  local tries=0
  until "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U "$superuser"; do
    ((++tries < 60)) || die "the server started but does not accept connections on 127.0.0.1:$port; see $dir/log"
    sleep 0.5
  done
  echo "postgres: running in $dir on 127.0.0.1:$port ($(url "$port"))"
}

stop() {
  if [[ ! -f $data/PG_VERSION ]]; then
    echo "postgres: no cluster in $dir, nothing to stop"
    return 0
  fi
  ensure_bindir
  if ! is_running; then
    echo "postgres: not running in $dir"
    return 0
  fi
  as_pg "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null ||
    die "pg_ctl stop failed; see $dir/log"
  echo "postgres: stopped in $dir"
}

url() { echo "postgresql://$superuser@127.0.0.1:$1/postgres"; }

command=${1:-}
case $command in
  start)
    (($# == 3)) || usage
    set_dir "$2"
    start "$3"
    ;;
  stop)
    (($# == 2)) || usage
    set_dir "$2"
    stop
    ;;
  status)
    (($# == 2)) || usage
    set_dir "$2"
    ensure_bindir
    if is_running; then
      echo "postgres: running in $dir on 127.0.0.1:$(running_port)"
    else
      echo "postgres: not running in $dir"
      exit 3
    fi
    ;;
  url)
    (($# == 2 || $# == 3)) || usage
    set_dir "$2"
    if (($# == 3)); then
      port=$3
    else
      port=$(running_port)
      [[ -n $port ]] || die "no server runs in $dir; give the PORT"
    fi
    check_port "$port"
    url "$port"
    ;;
  bin)
    (($# == 1)) || usage
    ensure_bindir
    echo "$bindir"
    ;;
  *) usage ;;
esac
