#!/usr/bin/env bash
# Make a Docker engine answer on this machine, idempotently, with gVisor's runtime registered.
#
# When `docker info` already works, only a missing `runsc` runtime is added (a configuration
# reload: running containers are untouched). Otherwise Debian's engine is installed if
# missing and started in the background without a bridge network: sandboxes only ever need
# `--network none`, and containers must never get an address on a private network here.
# DOCKER_DAEMON_JSON and DOCKERD_LOG move dockerd's configuration and log (tests/deploy runs
# this against a stand-in engine).
set -euo pipefail

WAIT_S="${DOCKER_WAIT_S:-60}"
LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"  # dockerd's own default

log() { echo "setup_docker: $*" >&2; }

# gVisor (`apt-get install runsc`) as the runtime "runsc" (TASKYARD_SANDBOX_RUNTIME=runsc), in
# /etc/docker/daemon.json, which dockerd reads at start and on SIGHUP. `--network=none`: no
# network stack in gVisor at all; without it this runsc refuses Docker's `--network none`
# ("cannot run with network enabled in root network namespace"). Its platform stays ptrace:
# kvm never starts a sandbox on these machines (docs/security.md). runsc is optional: where it
# cannot be registered the engine still serves runc, and this says why.
configure_runsc() {
    command -v runsc >/dev/null || return 0
    grep -qs '"runsc"' "$DAEMON_JSON" && return 0
    log "registering gVisor's runsc with the engine ($DAEMON_JSON)"
    runsc install --config_file "$DAEMON_JSON" --runtime runsc -- --network=none >&2 ||
        log "could not register runsc in $DAEMON_JSON; sandboxes keep runc"
}

engine_has_runsc() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

# A running engine reads its configuration again on SIGHUP (its containers keep running). Only
# a dockerd of this machine: an engine elsewhere (DOCKER_HOST) is configured where it runs.
reload_for_runsc() {
    local pid
    pid="$(pgrep -xo dockerd || true)"
    if [[ -z $pid ]]; then
        log "runsc is registered in $DAEMON_JSON, but no dockerd runs here to reload it"
        return 0
    fi
    log "reloading dockerd's configuration for runsc"
    kill -HUP "$pid" || return 0
    for _ in $(seq 10); do engine_has_runsc && return 0; sleep 1; done
    log "dockerd did not take the runsc runtime; see $LOG"
}

# An engine that started before runsc was registered (now, or on an earlier run) takes it.
take_runsc() {
    if grep -qs '"runsc"' "$DAEMON_JSON" && ! engine_has_runsc; then
        reload_for_runsc
    fi
}

configure_runsc
if docker info >/dev/null 2>&1; then
    take_runsc
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
    config=()
    [[ -f $DAEMON_JSON ]] && config=(--config-file "$DAEMON_JSON")
    nohup dockerd "${config[@]}" --bridge=none --iptables=false --ip-masq=false >"$LOG" 2>&1 &
fi
for _ in $(seq "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        log "docker is up"
        take_runsc  # a dockerd that was starting already when runsc was registered
        exit 0
    fi
    sleep 1
done
log "docker did not answer within ${WAIT_S}s; see $LOG"
exit 1
