# shellcheck shell=bash
# Shared settings and helpers for Foldline's scripts. Sourced, never run.
#
# Downloads are cached outside the checkout, in $FOLDLINE_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/foldline), so a second run or a fresh clone
# downloads nothing. Data, logs and pid files of the running services go to
# $FOLDLINE_STACK_DIR (default .stack/ in the checkout, ignored by git).

set -euo pipefail

FOLDLINE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FOLDLINE_CACHE="${FOLDLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/foldline}"
FOLDLINE_STACK_DIR="${FOLDLINE_STACK_DIR:-$FOLDLINE_ROOT/.stack}"

PULSAR_VERSION="${PULSAR_VERSION:-4.0.8}"
CASSANDRA_VERSION="${CASSANDRA_VERSION:-5.0.9}"
CQLSH_VERSION="${CQLSH_VERSION:-6.2.2}"
S3PROXY_VERSION="${S3PROXY_VERSION:-4.1.0}"

PULSAR_HOME="$FOLDLINE_CACHE/apache-pulsar-$PULSAR_VERSION"
CASSANDRA_LIB="$FOLDLINE_CACHE/cassandra-$CASSANDRA_VERSION/lib"
CQLSH_VENV="$FOLDLINE_CACHE/cqlsh-$CQLSH_VERSION"
M2_REPO="$FOLDLINE_CACHE/m2"
# The tiered-storage offloaders (the jclouds NAR) must sit in the
# distribution's own offloaders/ folder: a namespace's offload policy carries
# Pulsar's default offloadersDirectory (./offloaders), which overrides the
# broker's and resolves against the broker's working directory, $PULSAR_HOME.
# The NARs stay unpacked in $PULSAR_OFFLOADERS_DIST and are linked there.
PULSAR_OFFLOADERS="$PULSAR_HOME/offloaders"
PULSAR_OFFLOADERS_DIST="$FOLDLINE_CACHE/apache-pulsar-offloaders-$PULSAR_VERSION/offloaders"
S3PROXY_JAR="$M2_REPO/org/gaul/s3proxy/$S3PROXY_VERSION/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar"

# Ports, each overridable from the environment so that a second stack (with
# its own FOLDLINE_STACK_DIR) can run beside the first. The standalone's
# bookie and Cassandra's JMX take free ports of their own (0), and stream
# storage is off (-nss), so these are all the ports the stack listens on.
PULSAR_PORT="${PULSAR_PORT:-6650}"
PULSAR_HTTP_PORT="${PULSAR_HTTP_PORT:-8080}"
PULSAR_BOOKIE_PORT="${PULSAR_BOOKIE_PORT:-3181}"
CASSANDRA_PORT="${CASSANDRA_PORT:-9042}"
# TLS listeners beside the plain ones: the broker's binary protocol and web
# service (Cassandra takes TLS on its one native port, optionally).
PULSAR_TLS_PORT="${PULSAR_TLS_PORT:-6651}"
PULSAR_HTTPS_PORT="${PULSAR_HTTPS_PORT:-8443}"
CASSANDRA_STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
S3_PORT="${S3_PORT:-9000}"

# Authentication. By default the stack runs Pulsar with token authentication
# and authorization and Cassandra with PasswordAuthenticator and
# CassandraAuthorizer; FOLDLINE_STACK_OPEN=1 starts both open (no
# credentials). The superusers' credentials are generated at the first
# start into $FOLDLINE_CREDENTIALS (mode 0700, files 0600):
#   pulsar-secret.key    the HS256 key that signs every token (raw bytes)
#   pulsar-admin.token   the superuser's token (role $PULSAR_SUPERUSER)
#   cassandra.password   the password of Cassandra's superuser $CASSANDRA_SUPERUSER
#   cqlsh.credentials    the same, in cqlsh's --credentials format
# internal/services (tests, the foldline CLI) reads the same files.
FOLDLINE_STACK_OPEN="${FOLDLINE_STACK_OPEN:-0}"
FOLDLINE_CREDENTIALS="$FOLDLINE_STACK_DIR/credentials"
PULSAR_SUPERUSER=foldline-admin
PULSAR_SECRET_KEY="$FOLDLINE_CREDENTIALS/pulsar-secret.key"
PULSAR_ADMIN_TOKEN="$FOLDLINE_CREDENTIALS/pulsar-admin.token"
PULSAR_TOKEN_PLUGIN=org.apache.pulsar.client.impl.auth.AuthenticationToken
CASSANDRA_SUPERUSER=cassandra
CASSANDRA_PASSWORD_FILE="$FOLDLINE_CREDENTIALS/cassandra.password"
CQLSH_CREDENTIALS="$FOLDLINE_CREDENTIALS/cqlsh.credentials"

# TLS. The stack makes, at the first start, a CA of its own and a server
# certificate it signs for 127.0.0.1 and localhost, in $FOLDLINE_TLS:
#   ca.pem                 the CA certificate: what clients trust
#                          (--pulsar-tls-trust-certs-file, --cassandra-tls-ca-file)
#   server.pem, server.key the certificate and key of Pulsar's TLS ports
#   cassandra.p12          the same as a PKCS12 keystore for Cassandra, whose
#                          password is in cassandra.p12.password
# Pulsar listens with TLS on $PULSAR_TLS_PORT (pulsar+ssl://) and
# $PULSAR_HTTPS_PORT (https://) beside its plain ports; Cassandra takes TLS
# and plain connections on its one native port.
FOLDLINE_TLS="$FOLDLINE_CREDENTIALS/tls"

# The local S3 server (s3proxy) that holds offloaded ledger segments. The
# broker reads the same identity and credential from ACCESS_KEY_ID and
# ACCESS_KEY_SECRET (the offload driver `S3` takes them from its environment).
S3_ENDPOINT="http://127.0.0.1:$S3_PORT"
S3_REGION=us-east-1
S3_BUCKET=foldline-offload
S3_IDENTITY=foldline
S3_CREDENTIAL=foldline-local-secret

say() { printf '%s\n' "$*" >&2; }
step() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# need_java fails with a clear message when no Java 17+ is on the PATH.
need_java() {
  command -v java >/dev/null 2>&1 || die "java not found on PATH: install OpenJDK 17 (apt-get install -y openjdk-17-jre-headless)"
  local v
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ -n "$v" ] && [ "$v" -ge 17 ] || die "java 17 or newer is needed, found: $(java -version 2>&1 | head -1)"
}

# mvn_get GROUP:ARTIFACT:VERSION[:TYPE[:CLASSIFIER]] downloads one artifact into
# the cache's Maven repository and prints its path.
mvn_get() {
  local coords=$1 g a v t c path
  IFS=: read -r g a v t c <<<"$coords"
  t=${t:-jar}
  path="$M2_REPO/${g//.//}/$a/$v/$a-$v${c:+-$c}.$t"
  if [ ! -f "$path" ]; then
    command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH: install Maven (apt-get install -y maven)"
    step "downloading $coords from Maven Central" 
    local log="$FOLDLINE_CACHE/mvn-$a.log"
    mkdir -p "$FOLDLINE_CACHE"
    if ! mvn -B -q -Dmaven.repo.local="$M2_REPO" dependency:get \
        -Dartifact="$g:$a:$v:$t${c:+:$c}" -Dtransitive=false >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      die "downloading $coords failed; full log: $log"
    fi
  fi
  printf '%s\n' "$path"
}

# port_free PORT fails, naming the process, when something already listens on PORT.
port_free() {
  local port=$1 who
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    who=$(ss -ltnpH "sport = :$port" 2>/dev/null | sed -n 's/.*users:((\(.*\))).*/\1/p' | head -1)
    die "port $port is already in use${who:+ by $who}; stop that process or run scripts/stack down"
  fi
}

# pid_alive FILE succeeds when FILE holds the pid of a live process.
pid_alive() {
  local f=$1 pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# wait_until TIMEOUT_S LOGFILE PIDFILE DESCRIPTION CMD... polls CMD until it
# succeeds; on timeout or process death it prints the log's tail and what
# the last poll said, and fails.
wait_until() {
  local timeout=$1 log=$2 pidfile=$3 what=$4; shift 4
  local start=$SECONDS said
  until said=$("$@" 2>&1); do
    if ! pid_alive "$pidfile"; then
      say "--- last lines of $log ---"; tail -n 40 "$log" >&2 || true
      die "$what: the process exited before it was ready; log: $log"
    fi
    if (( SECONDS - start >= timeout )); then
      say "--- last lines of $log ---"; tail -n 40 "$log" >&2 || true
      say "--- what the last readiness check ($1) said ---"; printf '%s\n' "$said" | tail -n 20 >&2
      die "$what: not ready after ${timeout}s; log: $log"
    fi
    sleep 1
  done
  say "$what: ready after $(( SECONDS - start ))s"
}

# stop_pid FILE NAME sends SIGTERM to the service's process group, waits up
# to 60 s, then SIGKILL, and returns once the process is gone (so its ports
# are free for the next start).
stop_pid() {
  local f=$1 name=$2 pid i
  pid_alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  step "stopping $name (pid $pid)"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "$name did not stop in 60 s; killing it"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
  fi
  rm -f "$f"
}

# with_timer_slack sets the timer slack of the calling shell, which the
# process it then execs and all that process's threads inherit, to
# FOLDLINE_TIMER_SLACK_NS nanoseconds (default 1 ms; Linux's own is 50 µs; 0
# leaves Linux's). Call check_timer_slack first, in the parent shell, so that
# a bad value stops the script, not a subshell. Java and Go park idle threads
# for a few microseconds at a time, and each wake-up costs CPU: Cassandra's
# request workers wait that way while requests trickle in, and a function
# instance's threads between messages. With 1 ms of slack such waits end
# together and less often. Measured on the 2-core machine
# (docs/design/decisions.md, Timer slack): at a fixed 5000 events/s through the shop pipeline, the
# function instances (which inherit the broker's slack) used a quarter less
# CPU and the machine an eighth less, for about 5 ms more latency at the
# median; with one request every 2 ms, Cassandra used 0.20 of a core
# instead of 0.45 (BenchmarkTrickle in sinks/cassandra). scripts/bench-runtime
# gives its plain loops the broker's slack, so that they compare fairly.
with_timer_slack() {
  local ns="${FOLDLINE_TIMER_SLACK_NS:-1000000}"
  [ "$ns" != 0 ] || return 0
  echo "$ns" >/proc/self/timerslack_ns 2>/dev/null || say "warning: could not set the timer slack (/proc/self/timerslack_ns); running with Linux's default"
}

# check_timer_slack dies unless FOLDLINE_TIMER_SLACK_NS is unset or a whole
# number of nanoseconds.
check_timer_slack() {
  case "${FOLDLINE_TIMER_SLACK_NS:-1000000}" in
    '' | *[!0-9]*) die "FOLDLINE_TIMER_SLACK_NS=$FOLDLINE_TIMER_SLACK_NS: want a whole number of nanoseconds (0: Linux's default)" ;;
  esac
}

# function_tenants prints, for each tenant with function instances running
# under the stack's functions worker, the count and the tenant ("3 shop").
# The worker's process runtime runs every instance (Go, Java or Python) as a
# child process of Pulsar standalone, its instance config on the command
# line.
function_tenants() {
  local pidfile="$FOLDLINE_STACK_DIR/pulsar/pulsar.pid"
  pid_alive "$pidfile" || return 0
  ps -o args= --ppid "$(cat "$pidfile")" 2>/dev/null |
    awk 'match($0, /"tenant":"[^"]*"/) { print substr($0, RSTART + 10, RLENGTH - 11) }' |
    sort | uniq -c | awk '{ print $1, $2 }'
}

# cores_busy_percent prints how busy the machine's cores were, in percent,
# over the next $1 seconds (default 2), from /proc/stat.
cores_busy_percent() {
  local a b
  a=($(head -n 1 /proc/stat))
  sleep "${1:-2}"
  b=($(head -n 1 /proc/stat))
  # cpu user nice system idle iowait irq softirq steal: idle and iowait are not busy.
  awk -v a="${a[*]}" -v b="${b[*]}" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); total = 0; idle = 0
    for (i = 2; i <= 9 && i <= n; i++) { d = y[i] - x[i]; total += d; if (i == 5 || i == 6) idle += d }
    busy = 0; if (total > 0) busy = int(100 * (total - idle) / total + 0.5)
    print busy
  }'
}

# stack_open succeeds when the stack runs (or is to start) without
# authentication: FOLDLINE_STACK_OPEN=1.
stack_open() { [ "$FOLDLINE_STACK_OPEN" = 1 ]; }

# pulsar_auth_args prints pulsar-admin's authentication options when the
# stack has a superuser token.
pulsar_auth_args() {
  [ -f "$PULSAR_ADMIN_TOKEN" ] || return 0
  printf '%s\n' --auth-plugin "$PULSAR_TOKEN_PLUGIN" --auth-params "file://$PULSAR_ADMIN_TOKEN"
}

# cqlsh_auth_args prints cqlsh's authentication options when the stack has
# a Cassandra superuser password.
cqlsh_auth_args() {
  [ -f "$CQLSH_CREDENTIALS" ] || return 0
  printf '%s\n' -u "$CASSANDRA_SUPERUSER" --credentials "$CQLSH_CREDENTIALS"
}
