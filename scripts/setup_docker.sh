#!/usr/bin/env bash
# Make a Docker engine answer on this machine, idempotently, with gVisor's runtime registered.
#
# When `docker info` already works, only a missing `runsc` runtime is added (a configuration
# reload: running containers are untouched). Otherwise Debian's engine is installed if
# missing and started in the background without a bridge network: sandboxes only ever need
# `--network none`, and containers must never get an address on a private network here.
set -euo pipefail

WAIT_S="${DOCKER_WAIT_S:-60}"
LOG=/var/log/dockerd.log

log() { echo "setup_docker: $*" >&2; }

# gVisor (`apt-get install runsc`) as the runtime "runsc" (TASKYARD_SANDBOX_RUNTIME=runsc), in
# /etc/docker/daemon.json, which dockerd reads at start and on SIGHUP. `--network=none`: no
# network stack in gVisor at all; without it this runsc refuses Docker's `--network none`
# ("cannot run with network enabled in root network namespace"). Its platform stays ptrace:
# kvm never starts a sandbox on these machines (docs/security.md).
configure_runsc() {
    command -v runsc >/dev/null || return 0
    grep -qs '"runsc"' /etc/docker/daemon.json && return 0
    log "registering gVisor's runsc with the engine (/etc/docker/daemon.json)"
    runsc install --runtime runsc -- --network=none >&2
}

engine_has_runsc() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

configure_runsc
if docker info >/dev/null 2>&1; then
    if command -v runsc >/dev/null && ! engine_has_runsc; then
        log "reloading dockerd's configuration for runsc"
        kill -HUP "$(pgrep -xo dockerd)"
        for _ in $(seq 10); do engine_has_runsc && break; sleep 1; done
        engine_has_runsc || log "dockerd did not take the runsc runtime; see $LOG"
    fi
    exit 0
fi
if ! command -v dockerd >/dev/null; then
    log "installing docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io >&2
    configure_runsc
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
