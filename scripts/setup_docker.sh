#!/usr/bin/env bash
# Make a Docker engine answer on this machine, idempotently.
#
# Nothing happens when `docker info` already works. Otherwise Debian's engine is installed if
# missing and started in the background without a bridge network: sandboxes only ever need
# `--network none`, and containers must never get an address on a private network here.
set -euo pipefail

WAIT_S="${DOCKER_WAIT_S:-60}"
LOG=/var/log/dockerd.log

log() { echo "setup_docker: $*" >&2; }

if docker info >/dev/null 2>&1; then
    exit 0
fi
if ! command -v dockerd >/dev/null; then
    log "installing docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io >&2
fi
if ! pgrep -x dockerd >/dev/null; then
    log "starting dockerd (log: $LOG)"
    nohup dockerd --bridge=none --iptables=false --ip-masq=false >"$LOG" 2>&1 &
fi
for _ in $(seq "$WAIT_S"); do
    docker info >/dev/null 2>&1 && { log "docker is up"; exit 0; }
    sleep 1
done
log "docker did not answer within ${WAIT_S}s; see $LOG"
exit 1
