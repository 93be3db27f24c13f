#!/usr/bin/env bash
# Eventide's deployment on one machine, without containers, for development
# and tests: three nats-server processes (the nats-server module at the
# version in go.mod, built here) running deploy/nats's configs on loopback
# ports, storage nodes (cmd/ingest) and the query service (cmd/query).
#
#   deploy/local-cluster.sh start   # builds, starts, waits until ready, prints where
#   deploy/local-cluster.sh stop    # SIGTERM to what start started (its pid files), waits
#
# Environment: EVENTIDE_LOCAL_DIR (default $TMPDIR/eventide-local-cluster, outside
# the repository, so nothing built lands in a commit: binaries, configs,
# data, logs, pid files, secrets.env), EVENTIDE_LOCAL_PORT (default 14000:
# NATS clients on +222..+224, routes +622..+624, monitoring +822..+824,
# query HTTP +80, storage HTTP +81 and +82, storage admin +61 and +62;
# keep them below the kernel's ephemeral ports, 32768 and up by default,
# which any outgoing connection may take).
#
# Storage nodes: with the sharding flags in cmd/ingest (--node-id, --shards,
# --own-shards, --owners-kv), two nodes claiming shards 0-3 and 4-7 of 8 in the
# owners bucket eventide-shard-owners, and cmd/query
# routing to them; a cmd/ingest without them runs one storage node owning
# everything, whose HTTP API serves the queries (cmd/query is started only
# when it has --owners).
set -euo pipefail

dir=${EVENTIDE_LOCAL_DIR:-${TMPDIR:-/tmp}/eventide-local-cluster}
port=${EVENTIDE_LOCAL_PORT:-14000}
root=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "local-cluster: $*" >&2; exit 1; }

# wait_http URL SECONDS PIDFILE: until URL answers 2xx, or fail naming the log.
wait_http() {
	local url=$1 secs=$2 name=$3
	for _ in $(seq $((secs * 10))); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then return 0; fi
		local pid; pid=$(cat "$dir/$name.pid")
		if ! kill -0 "$pid" 2>/dev/null; then
			# It is this shell's child: wait gives its exit status
			# (128+N when signal N ended it).
			local status=0
			wait "$pid" 2>/dev/null || status=$?
			die "$name (pid $pid) exited with status $status; see $dir/logs/$name.log"
		fi
		sleep 0.1
	done
	die "$name not ready at $url within ${secs}s; see $dir/logs/$name.log"
}

# run NAME CMD...: start in the background, log and pid file in $dir.
run() {
	local name=$1; shift
	[ -e "$dir/$name.pid" ] && kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null && die "$name is already running (pid $(cat "$dir/$name.pid")); stop first"
	"$@" >"$dir/logs/$name.log" 2>&1 &
	echo $! >"$dir/$name.pid"
}

start() {
	command -v curl >/dev/null || die "curl is needed to wait for readiness"
	mkdir -p "$dir/bin" "$dir/logs"
	dir=$(cd "$dir" && pwd)
	echo "building into $dir/bin"
	(cd "$root" && go build -o "$dir/bin/ingest" ./cmd/ingest && go build -o "$dir/bin/query" ./cmd/query &&
		go build -o "$dir/bin/nats-server" github.com/nats-io/nats-server/v2)

	if [ ! -e "$dir/secrets.env" ]; then
		umask 077
		for v in EVENTIDE_NATS_PASSWORD PRODUCER_NATS_PASSWORD NATS_SYS_PASSWORD QUERY_NATS_PASSWORD; do
			echo "$v=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
		done >"$dir/secrets.env"
		umask 022
	fi
	set -a; . "$dir/secrets.env"; set +a

	local routes=()
	for i in 1 2 3; do routes+=(-e "s|nats-route://n$i:6222|nats-route://127.0.0.1:$((port + 621 + i))|"); done
	for i in 1 2 3; do
		local conf="$dir/nats/n$i"
		mkdir -p "$conf" "$dir/nats/n$i-store"
		sed -e "s|listen: 0.0.0.0:4222|listen: 127.0.0.1:$((port + 221 + i))|" \
			-e "s|http: 0.0.0.0:8222|http: 127.0.0.1:$((port + 821 + i))|" \
			-e "s|store_dir: /data/nats|store_dir: \"$dir/nats/n$i-store\"|" \
			"$root/deploy/nats/common.conf" >"$conf/common.conf"
		sed -e "s|listen: 0.0.0.0:6222|listen: 127.0.0.1:$((port + 621 + i))|" "${routes[@]}" \
			"$root/deploy/nats/n$i.conf" >"$conf/n$i.conf"
		run "n$i" "$dir/bin/nats-server" -c "$conf/n$i.conf"
	done
	for i in 1 2 3; do wait_http "http://127.0.0.1:$((port + 821 + i))/healthz" 60 "n$i"; done

	local url="nats://127.0.0.1:$((port + 222)),nats://127.0.0.1:$((port + 223)),nats://127.0.0.1:$((port + 224))"
	export EVENTIDE_NATS_USER=eventide
	local storage=()
	if "$dir/bin/ingest" -h 2>&1 | grep -- '--own-shards' >/dev/null; then
		storage=("storage-1 0-3" "storage-2 4-7")
	else
		echo "cmd/ingest has no --own-shards yet: one storage node owns every partition"
		storage=("storage-1 -")
	fi
	local n=0
	for s in "${storage[@]}"; do
		local name=${s% *} shards=${s#* } extra=()
		n=$((n + 1))
		[ "$shards" != - ] && extra=(--node-id "$name" --shards 8 --own-shards "$shards" --owners-kv eventide-shard-owners)
		# Per-shard snapshots in one directory both nodes share: POST
		# /admin/shards/{N}/snapshot on a node's admin port writes one, and
		# a node gaining a shard it never held imports it.
		if [ "$shards" != - ] && "$dir/bin/ingest" -h 2>&1 | grep -- '--restore-shards-from' >/dev/null; then
			extra+=(--admin "127.0.0.1:$((port + 60 + n))" --snapshot-dir "$dir/shard-snapshots" --restore-shards-from "$dir/shard-snapshots")
		fi
		# One storage node creates the streams; the next waits for it, so
		# two do not race to create them.
		run "$name" "$dir/bin/ingest" --data "$dir/$name" --http "127.0.0.1:$((port + 80 + n))" \
			--nats-url "$url" --replicas 3 "${extra[@]}"
		wait_http "http://127.0.0.1:$((port + 80 + n))/readyz" 120 "$name"
	done
	local api="http://127.0.0.1:$((port + 81))"
	if "$dir/bin/query" -h 2>&1 | grep -- '--owners' >/dev/null; then
		# The query user is read-only (deploy/nats/common.conf).
		EVENTIDE_NATS_USER=query EVENTIDE_NATS_PASSWORD=$QUERY_NATS_PASSWORD \
			run query "$dir/bin/query" --http "127.0.0.1:$((port + 80))" --nats-url "$url" \
			--shards 8 --owners "0-3=storage-1,4-7=storage-2" --owners-kv eventide-shard-owners
		wait_http "http://127.0.0.1:$((port + 80))/readyz" 60 query
		api="http://127.0.0.1:$((port + 80))"
	else
		echo "cmd/query has no --owners yet: not started; the storage node's API answers"
	fi
	cat <<EOF

Eventide is running (logs in $dir/logs; stop with: $0 stop).
  NATS      $url  (users in $dir/secrets.env; producers: producer / \$PRODUCER_NATS_PASSWORD)
  API       $api
  snapshot  curl -X POST http://127.0.0.1:$((port + 61))/admin/shards/0/snapshot  (storage-1; storage-2 on $((port + 62)); into $dir/shard-snapshots)
  publish   nats --server nats://producer:\$PRODUCER_NATS_PASSWORD@127.0.0.1:$((port + 222)) pub --jetstream events.click '{"time":"$(date -u +%Y-%m-%dT%H:%M:%SZ)"}'
EOF
}

stop() {
	[ -d "$dir" ] || die "no $dir: nothing was started there"
	# Query and storage first (they flush and close), NATS last.
	for name in query storage-2 storage-1 n3 n2 n1; do
		local f="$dir/$name.pid"
		[ -e "$f" ] || continue
		local pid; pid=$(cat "$f")
		if kill -TERM "$pid" 2>/dev/null; then
			for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$pid" 2>/dev/null && die "$name (pid $pid) still running after 120s"
		fi
		rm -f "$f"
		echo "stopped $name"
	done
}

case ${1:-} in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop  (EVENTIDE_LOCAL_DIR, EVENTIDE_LOCAL_PORT)" >&2; exit 2 ;;
esac
