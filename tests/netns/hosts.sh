#!/bin/bash
# Many "hosts" on one machine: network namespaces joined by veth pairs through a bridge that
# lives in a namespace of its own, optionally rate-limited with tc tbf on both ends of each link.
#
#   host i:   namespace ${PREFIX}h${i}, interface ${PRISM_NETNS_IF} (default veth0),
#             address ${PRISM_NETNS_SUBNET}.$((i+1))/24 (default 10.77.0.x), loopback up
#   bridge:   namespace ${PREFIX}br, bridge br0, one port vh${i} per host
#   rate:     tc qdisc add dev IF root tbf rate RATE burst ${PRISM_NETNS_BURST} latency
#             ${PRISM_NETNS_LATENCY} on the host end (host -> bridge) and on the bridge end
#             (bridge -> host), so each direction of each link is limited.
#
# Nothing is created in the root namespace (the veth pairs are made inside the bridge namespace
# and one end is moved into the host's), so runs with different prefixes never collide, and
# only the namespaces' own subnet is ever used.
#
# CLI:
#   hosts.sh up N [RATE]     make N hosts (RATE such as 1gbit; none: no limit); they stay until
#                            'down'. Prints one line per host: NAME ADDRESS.
#   hosts.sh down            delete every namespace of this prefix (idempotent)
#   hosts.sh status          list this prefix's namespaces and their addresses
#   hosts.sh exec I CMD...   run CMD inside host I
# Exit status 77 (ctest's SKIP) when not root or when 'ip netns add' does not work here.
#
# Library (source it):
#   netns_require       returns 77 with a reason on stderr unless namespaces can be made here
#   netns_up N [RATE]   makes the hosts; installs a trap (EXIT INT TERM) that runs netns_down
#                       unless PRISM_NETNS_NO_TRAP=1; on failure cleans up and returns non-zero
#                       (77 when 'ip netns add' failed)
#   netns_down          deletes everything of this prefix; idempotent, bounded
#   netns_name I, netns_addr I, netns_if, netns_exec I CMD..., netns_tx_bytes I, netns_rx_bytes I
#
# Environment: PRISM_NETNS_PREFIX (default prism-), PRISM_NETNS_SUBNET (first three octets,
# default 10.77.0), PRISM_NETNS_IF (default veth0), PRISM_NETNS_BURST (512kb),
# PRISM_NETNS_LATENCY (50ms), PRISM_NETNS_MAX (largest N accepted, default 64).

: "${PRISM_NETNS_PREFIX:=prism-}"
: "${PRISM_NETNS_SUBNET:=10.77.0}"
: "${PRISM_NETNS_IF:=veth0}"
: "${PRISM_NETNS_BURST:=512kb}"
: "${PRISM_NETNS_LATENCY:=50ms}"
: "${PRISM_NETNS_MAX:=64}"

_netns_log() { echo "hosts.sh: $*" >&2; }

netns_name() { echo "${PRISM_NETNS_PREFIX}h$1"; }
netns_bridge() { echo "${PRISM_NETNS_PREFIX}br"; }
netns_addr() { echo "${PRISM_NETNS_SUBNET}.$(($1 + 1))"; }
netns_if() { echo "$PRISM_NETNS_IF"; }
netns_exec() {
  local i=$1
  shift
  ip netns exec "$(netns_name "$i")" "$@"
}
netns_tx_bytes() { netns_exec "$1" cat "/sys/class/net/$PRISM_NETNS_IF/statistics/tx_bytes"; }
netns_rx_bytes() { netns_exec "$1" cat "/sys/class/net/$PRISM_NETNS_IF/statistics/rx_bytes"; }

# Namespaces of this prefix: the hosts (PREFIXh<digits>) and the bridge (PREFIXbr).
_netns_ours() {
  local name
  # 'ip netns list' prints "name" or "name (id: N)"; a bounded read of a finite list.
  ip netns list 2>/dev/null | awk '{print $1}' | while read -r name; do
    case "$name" in
      "${PRISM_NETNS_PREFIX}br") echo "$name" ;;
      "${PRISM_NETNS_PREFIX}h"*)
        [[ "${name#"${PRISM_NETNS_PREFIX}h"}" =~ ^[0-9]+$ ]] && echo "$name" ;;
    esac
  done
}

netns_require() {
  if [[ $EUID -ne 0 ]]; then
    echo "SKIP: network namespaces need root (running as uid $EUID)" >&2
    return 77
  fi
  local tool
  for tool in ip tc; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "SKIP: '$tool' not found (install iproute2)" >&2
      return 77
    fi
  done
  return 0
}

netns_down() {
  local ns pid pids
  for ns in $(_netns_ours); do
    # Processes still inside one of our namespaces were started there by us (the test or the
    # run it launched): end them by id, politely first, so the namespace really goes away.
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n "$pids" ]]; then
      for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
      for _ in 1 2 3 4 5 6 7 8 9 10; do
        [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] && break
        sleep 0.2
      done
      for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
    fi
    # Deleting a namespace deletes its interfaces and with them their veth peers.
    ip netns del "$ns" 2>/dev/null || _netns_log "could not delete namespace $ns"
  done
  return 0
}

_netns_trap() {
  local status=$?
  trap - EXIT INT TERM
  netns_down
  exit "$status"
}

# For test scripts: a temporary directory $TMP, removed with the namespaces however the script
# ends; `fail MESSAGE` ends the test; `run LIMIT CMD...` runs a command under a timeout, its
# output shown, failing the test with its name when it times out or exits non-zero.
netns_test_begin() {
  TMP=$(mktemp -d)
  trap _netns_test_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
_netns_test_cleanup() {
  local status=$?
  trap - EXIT INT TERM
  netns_down
  rm -rf "$TMP"
  exit "$status"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {
  local limit=$1 status
  shift
  echo "+ $(printf '%q ' "$@")"
  timeout -k 10 "$limit" "$@"
  status=$?
  ((status == 124 || status == 137)) && fail "timed out after ${limit}s: $*"
  ((status == 0)) || fail "exit $status: $*"
}

netns_up() {
  local n=$1 rate=${2:-}
  if ! [[ "$n" =~ ^[0-9]+$ ]] || ((n < 1 || n > PRISM_NETNS_MAX)); then
    _netns_log "the number of hosts must be 1..$PRISM_NETNS_MAX, got '$n'"
    return 2
  fi
  if ((n > 254)); then
    _netns_log "at most 254 hosts fit in ${PRISM_NETNS_SUBNET}.0/24"
    return 2
  fi
  netns_require || return $?
  if [[ "${PRISM_NETNS_NO_TRAP:-0}" != 1 ]]; then
    trap _netns_trap EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
  fi
  # Start clean: leftovers of an earlier run with this prefix would make 'ip netns add' fail.
  netns_down

  local br ns i
  br=$(netns_bridge)
  if ! ip netns add "$br" 2>/dev/null; then
    echo "SKIP: 'ip netns add $br' failed: network namespaces are not available here" >&2
    netns_down
    return 77
  fi
  _netns_run() {
    if ! "$@"; then
      _netns_log "failed: $*"
      return 1
    fi
  }
  {
    _netns_run ip -n "$br" link set lo up &&
      _netns_run ip -n "$br" link add br0 type bridge &&
      _netns_run ip -n "$br" link set br0 up
  } || { netns_down; return 1; }

  for ((i = 0; i < n; i++)); do
    ns=$(netns_name "$i")
    {
      _netns_run ip netns add "$ns" &&
        _netns_run ip -n "$ns" link set lo up &&
        _netns_run ip -n "$br" link add "vh$i" type veth peer name "$PRISM_NETNS_IF" netns "$ns" &&
        _netns_run ip -n "$br" link set "vh$i" master br0 &&
        _netns_run ip -n "$br" link set "vh$i" up &&
        _netns_run ip -n "$ns" addr add "$(netns_addr "$i")/24" dev "$PRISM_NETNS_IF" &&
        _netns_run ip -n "$ns" link set "$PRISM_NETNS_IF" up
    } || { netns_down; return 1; }
    if [[ -n "$rate" ]]; then
      {
        _netns_run ip netns exec "$ns" tc qdisc add dev "$PRISM_NETNS_IF" root tbf rate "$rate" \
          burst "$PRISM_NETNS_BURST" latency "$PRISM_NETNS_LATENCY" &&
          _netns_run ip netns exec "$br" tc qdisc add dev "vh$i" root tbf rate "$rate" \
            burst "$PRISM_NETNS_BURST" latency "$PRISM_NETNS_LATENCY"
      } || { netns_down; return 1; }
    fi
  done

  # Wait (bounded) until every host's interface reports carrier.
  local ok
  for _ in $(seq 1 50); do
    ok=1
    for ((i = 0; i < n; i++)); do
      if [[ "$(netns_exec "$i" cat "/sys/class/net/$PRISM_NETNS_IF/operstate" 2>/dev/null)" != up ]]; then
        ok=0
        break
      fi
    done
    ((ok)) && break
    sleep 0.1
  done
  if ((!ok)); then
    _netns_log "interfaces did not come up within 5 s"
    netns_down
    return 1
  fi
  return 0
}

netns_status() {
  local ns
  for ns in $(_netns_ours); do
    echo "$ns: $(ip -n "$ns" -o -4 addr show 2>/dev/null | awk '$2 != "lo" {printf "%s %s ", $2, $4}')"
    ip netns exec "$ns" tc qdisc show 2>/dev/null | grep tbf | sed 's/^/    /'
  done
}

# Run as a script (not sourced): the CLI.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  cmd=${1:-}
  shift || true
  case "$cmd" in
    up)
      [[ $# -ge 1 ]] || { echo "usage: $0 up N [RATE]" >&2; exit 2; }
      netns_up "$@" || exit $?
      trap - EXIT INT TERM # keep them: 'hosts.sh down' removes them
      for ((i = 0; i < $1; i++)); do echo "$(netns_name "$i") $(netns_addr "$i")"; done
      ;;
    down)
      netns_require || exit $?
      netns_down
      left=$(_netns_ours)
      [[ -z "$left" ]] || { echo "hosts.sh: still present: $left" >&2; exit 1; }
      ;;
    status) netns_status ;;
    exec)
      [[ $# -ge 2 ]] || { echo "usage: $0 exec I CMD..." >&2; exit 2; }
      netns_exec "$@"
      ;;
    *)
      echo "usage: $0 up N [RATE] | down | status | exec I CMD...   (prefix: PRISM_NETNS_PREFIX=$PRISM_NETNS_PREFIX)" >&2
      exit 2
      ;;
  esac
fi
