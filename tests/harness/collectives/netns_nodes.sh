#!/usr/bin/env bash
# Two "nodes" on one machine, for the multi-node tests: each node is a network namespace
# (ss-node1, ss-node2) whose processes see their own host name (node1, node2, through a UTS
# namespace made when entering), their own /etc/hosts (ip netns exec mounts
# /etc/netns/NS/hosts over it) and one end of a veth pair, the only link between the nodes,
# named ss-link on both (as every node of a cluster may call its NIC eth0). The addresses
# (10.231.22.1 and .2) are private to these namespaces: nothing outside them gets one.
#
#   netns_nodes.sh subnet        print the nodes' subnet (10.231.22.0/24)
#   netns_nodes.sh check         exit 0 when nodes can be made here; else print why, exit 77
#   netns_nodes.sh up            create both nodes (after removing any leftover ones)
#   netns_nodes.sh shape RATE    shape both directions of the link to RATE (tc's units:
#                                200mbit); "none" removes the shaping
#   netns_nodes.sh exec NODE CMD...   run CMD on node1 or node2 (also Open MPI's launch agent:
#                                it is called as `AGENT NODE COMMAND-STRING`)
#   netns_nodes.sh kill NODE     SIGKILL every process on NODE
#   netns_nodes.sh slurm-up      a Slurm cluster of the nodes (after `up`): munged (on the
#                                host, a private socket), slurmctld on node1, slurmd on
#                                each; prints the slurm.conf path for SLURM_CONF. Exit 77
#                                when slurmctld, slurmd or munged is missing
#   netns_nodes.sh down          kill every process on the nodes, remove them; idempotent,
#                                bounded in time, safe to call when nothing is up
set -euo pipefail

readonly nodes=(node1 node2)
readonly subnet=10.231.22
ns_of() { echo "ss-$1"; }
readonly link=ss-link
# Slurm's and munge's files: not under /tmp, which is private to each Slurm node.
readonly state=/run/ss-nodes
address_of() { echo "$subnet.${1#node}"; }

# Why nodes cannot be made here, or nothing.
why_not() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "needs root (network namespaces, veth, tc)"
  elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "needs iproute2 (ip, tc): apt-get install iproute2"
  elif ! command -v unshare >/dev/null; then
    echo "needs unshare (util-linux)"
  elif ! ip netns add ss-probe 2>/dev/null; then
    echo "ip netns add fails here (no CAP_SYS_ADMIN, or no network namespaces in this kernel)"
  else
    ip netns del ss-probe
    if ! unshare --uts true 2>/dev/null; then echo "unshare --uts fails here"; fi
  fi
}

down() {
  local node ns
  # The nodes' processes first: slurmctld and slurmd write under $state until they die.
  for node in "${nodes[@]}"; do
    ns=$(ns_of "$node")
    if ip netns list | grep -qw "$ns"; then
      # SIGKILL: the processes of a test that failed may be stuck in a collective.
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      for _ in $(seq 50); do
        [[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && break
        sleep 0.1
      done
      # Removing the namespace removes its veth end (and so the pair) and the qdiscs.
      ip netns del "$ns" 2>/dev/null || true
    fi
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null || true  # made by `up` when missing; kept when not empty
  stop_munged
  # --one-file-system: never into a mount (a node's view of the host's /tmp lives under it,
  # though only inside the node's own mount namespace).
  rm -rf --one-file-system "$state"
}

# munged writes its seed file as it exits, after SIGTERM returns: removing its directory
# before it has gone fails with "Directory not empty" (seen in CI).
stop_munged() {
  local pid
  [[ -f $state/munge/munged.pid ]] || return 0
  pid=$(cat "$state/munge/munged.pid")
  [[ $pid =~ ^[0-9]+$ ]] && kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

up() {
  down
  local node ns
  for node in "${nodes[@]}"; do
    ns=$(ns_of "$node")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    {
      echo "127.0.0.1 localhost"
      for n in "${nodes[@]}"; do echo "$(address_of "$n") $n"; done
    } >"/etc/netns/$ns/hosts"
  done
  ip link add "$link" netns "$(ns_of node1)" type veth peer name "$link" netns "$(ns_of node2)"
  for node in "${nodes[@]}"; do
    ns=$(ns_of "$node")
    ip -n "$ns" addr add "$(address_of "$node")/24" dev "$link"
    ip -n "$ns" link set "$link" up
  done
}

# tbf on each end's egress: each direction carries at most RATE. The burst is a few
# full-size packets (enough for the rate at this HZ, small against the messages measured);
# the queue holds 100 ms at the rate, so TCP sees delay before drops.
shape() {
  local rate=$1 node ns dev=$link
  for node in "${nodes[@]}"; do
    ns=$(ns_of "$node")
    tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    # Segmentation offload would hand tbf 64 KB packets that exceed the bucket.
    ip netns exec "$ns" ethtool -K "$dev" tso off gso off >/dev/null 2>&1 || true
    if [[ $rate != none ]]; then
      tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 64kb latency 100ms
    fi
  done
}

slurm_conf() {
  cat <<CONF
ClusterName=scalescope
SlurmctldHost=node1($(address_of node1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$state/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$state/slurmctld
SlurmdSpoolDir=$state/spool-%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd-%n.log
# No cgroups for the jobs: the nodes share the host's, which the tests do not own.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
CONF
  local n
  for n in "${nodes[@]}"; do
    echo "NodeName=$n NodeAddr=$(address_of "$n") CPUs=$(nproc) State=UNKNOWN"
  done
  echo "PartitionName=nodes Nodes=node[1-${#nodes[@]}] Default=YES State=UP OverSubscribe=FORCE"
}

slurm_up() {
  local tool node
  for tool in slurmctld slurmd munged srun sinfo; do
    command -v "$tool" >/dev/null || {
      echo "SKIP: $tool not found (Debian: apt-get install slurmctld slurmd slurm-client munge)"
      exit 77
    }
  done
  mkdir -p "$state/slurmctld"
  install -d -o munge -g munge -m 0711 "$state/munge"
  runuser -u munge -- munged --socket="$state/munge/munge.socket" \
    --pid-file="$state/munge/munged.pid" --log-file="$state/munge/munged.log" \
    --seed-file="$state/munge/seed"
  slurm_conf >"$state/slurm.conf"
  (enter node1 slurmctld -f "$state/slurm.conf")
  # What the jobs need from the host's /tmp, which a node's own /tmp hides: the repository
  # (its binary and the tests' working directory, when a checkout lies there, as CI's may).
  local keep=() root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
  local p
  for p in "$root" "$PWD"; do
    [[ $p == /tmp/* && $p != "$root"/* ]] && keep+=("$p")
  done
  for node in "${nodes[@]}"; do
    mkdir -p "$state/spool-$node" "$state/host-tmp-$node"
    # slurmd (22.05) will not start without the cgroup hierarchies it knows, and ip netns
    # exec gives a node a /sys without them: mount the host's v1 hierarchies again inside
    # the node's mount namespace. And a /tmp of its own, as a real node has: the PMIx
    # plugin makes the same directory name in /tmp on every node of a job. The host's /tmp
    # stays reachable at $2 for the paths in `keep`, bound back to where they were.
    (enter "$node" sh -c '
      mount --bind /tmp "$2" || exit 1
      mount -t tmpfs tmp /tmp && mount -t tmpfs cgroup /sys/fs/cgroup || exit 1
      conf=$1 node=$0 host_tmp=$2
      shift 2
      for p; do
        mkdir -p "$p" && mount --bind "$host_tmp${p#/tmp}" "$p" || exit 1
      done
      set -- "$conf"
      for c in cpuset memory devices freezer cpu cpuacct name=systemd; do
        d=/sys/fs/cgroup/${c#name=}
        o=$c
        [ "${c#name=}" = "$c" ] || o=none,$c
        mkdir -p "$d" && mount -t cgroup -o "$o" none "$d" || exit 1
      done
      exec slurmd -f "$1" -N "$node"' "$node" "$state/slurm.conf" "$state/host-tmp-$node" \
      "${keep[@]}")
  done
  for _ in $(seq 100); do
    if [[ $(SLURM_CONF=$state/slurm.conf enter node1 sinfo -h -t idle -o %D 2>/dev/null) == "${#nodes[@]}" ]]; then
      echo "$state/slurm.conf"
      return 0
    fi
    sleep 0.2
  done
  echo "netns_nodes.sh: the Slurm nodes did not come up within 20 s; slurmd's log:" >&2
  tail -n 20 "$state"/slurmd-*.log >&2
  exit 1
}

enter() {
  local node=$1
  shift
  [[ " ${nodes[*]} " == *" $node "* ]] || {
    echo "netns_nodes.sh: no node '$node' (nodes: ${nodes[*]})" >&2
    exit 2
  }
  exec ip netns exec "$(ns_of "$node")" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
    "$node" "$@"
}

case "${1:-}" in
  check)
    reason=$(why_not)
    if [[ -n $reason ]]; then
      echo "SKIP: $reason"
      exit 77
    fi
    ;;
  subnet) echo "$subnet.0/24" ;;
  up) up ;;
  down) down ;;
  shape) shape "$2" ;;
  exec)
    shift
    enter "$@"
    ;;
  kill) ip netns pids "$(ns_of "$2")" | xargs -r kill -9 ;;
  slurm-up) slurm_up ;;
  *)
    # Open MPI's rsh launcher calls its agent as ssh: `AGENT [options] HOST WORDS...`, the
    # words one command line for the remote shell.
    while [[ ${1:-} == -* ]]; do shift; done
    [[ $# -ge 2 ]] || {
      echo "usage: netns_nodes.sh check|up|down|shape RATE|exec NODE CMD...|kill NODE" >&2
      exit 2
    }
    node=$1
    shift
    enter "$node" sh -c "$*"
    ;;
esac
