#!/usr/bin/env bash
# A throw-away two-node SLURM for the integration tests (tests/test_slurm*.py), from Debian's
# packages, without systemd: two slurmd on this machine (`slurmd -N`), each a node of all its
# CPUs (overcommitted: slurmd's config_overrides) and half its memory with one fake GPU, so a
# job can span two nodes and a packed submission of two jobs gets two CPUs on a 2-core machine.
#
#   tests/slurm/cluster.sh up     install the packages if missing, write a config, start
#                                 munged, slurmctld and slurmd
#   tests/slurm/cluster.sh down   stop the daemons this script started (by their pid files)
#
# Everything (config, state, logs, pid files, munge socket) lives in $SPARSELEN_SLURM_DIR
# (default /tmp/sparselen-slurm). Only /etc/slurm/{slurm,gres}.conf are symlinked to it, because
# the plugin's job step strips SLURM_CONF from the environment of the `srun` it runs inside each
# job, so the default config path must work; `down` removes the links. An /etc/slurm/slurm.conf
# that is not ours is never touched (exit 3). Needs root. Exit codes: 0 ok, 3 a SLURM cannot be
# set up here (not root, no apt-get, failed install, another SLURM config): the test skips on 3
# and fails on anything else.
#
# Settings that work with Debian 12's slurm-wlm 22.05 in a container:
# proctrack/linuxproc and task/none (no cgroups), select/cons_tres, no accounting database,
# RealMemory from `slurmd -C`, MinJobAge=600 so `squeue` still lists finished jobs when
# Snakemake asks (the plugin's --slurm-status-command squeue needs MinJobAge >= 3x its first
# check delay), and one fake GPU per node (gres on /dev/null and /dev/zero) so GPU requests are
# scheduled (the jobs themselves run on CPU). Nodes sl1 and sl2 share this host's address, on
# ports of their own; their spool, pid and log files carry the node name (%n).
set -euo pipefail

DIR=${SPARSELEN_SLURM_DIR:-/tmp/sparselen-slurm}
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF # for this script's own client calls
PACKAGES=(slurmctld slurmd slurm-client munge)
NODES=(sl1 sl2)
DAEMONS=(slurmd-sl1 slurmd-sl2 slurmctld munged) # stop order; started in reverse

say() { echo "cluster.sh: $*" >&2; }
cannot() { say "$*"; exit 3; }

install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || cannot "no apt-get to install ${missing[*]}"
    say "installing ${missing[*]}"
    # policy-rc.d keeps the packages' init scripts from starting system daemons.
    export DEBIAN_FRONTEND=noninteractive
    local quiet=(-qq -o Dpkg::Use-Pty=0)
    { apt-get install -y --no-install-recommends "${quiet[@]}" "${missing[@]}" ||
        { apt-get update -qq && apt-get install -y --no-install-recommends "${quiet[@]}" "${missing[@]}"; }
    } >"$DIR/log/apt.log" 2>&1 || cannot "apt-get install ${missing[*]} failed (see $DIR/log/apt.log)"
}

write_config() {
    local host mem cpus port
    host=$(hostname -s)
    port=${SPARSELEN_SLURMD_PORT:-6818}
    # RealMemory must not exceed what slurmd detects, or the node is drained.
    read -r cpus mem < <(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*RealMemory=\([0-9]*\).*/\1 \2/p')
    mkdir -p "$DIR"/{etc,state,spool,log,run}
    cat >"$CONF" <<EOF
# Written by tests/slurm/cluster.sh: a two-node test cluster on one machine, not for production.
ClusterName=sparselen-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=${SPARSELEN_SLURMCTLD_PORT:-6817}
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=sl1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$port CPUs=$cpus RealMemory=$((mem / 2)) Gres=gpu:1 State=UNKNOWN
NodeName=sl2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=$cpus RealMemory=$((mem / 2)) Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=sl1,sl2 Default=YES MaxTime=INFINITE State=UP
EOF
    # One fake GPU per node, so two GPU jobs run at once on the two-core CI machine. Each needs
    # a device file of its own (two on /dev/null crash slurmd).
    printf 'NodeName=%s Name=gpu File=%s\n' sl1 /dev/null sl2 /dev/zero >"$DIR/etc/gres.conf"
}

ours() { [ "$(readlink "/etc/slurm/$1")" = "$DIR/etc/$1" ]; }

link_config() {
    local f
    for f in slurm.conf gres.conf; do
        ours "$f" && continue
        [ -e "/etc/slurm/$f" ] && cannot "/etc/slurm/$f exists and is not ours: a SLURM is set up here already"
    done
    mkdir -p /etc/slurm
    for f in slurm.conf gres.conf; do ln -sfn "$DIR/etc/$f" "/etc/slurm/$f"; done
}

pidfile() { if [ "$1" = munged ]; then echo "$DIR/munge/munged.pid"; else echo "$DIR/run/$1.pid"; fi; }
alive() { [ -s "$(pidfile "$1")" ] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }

start_munge() {
    alive munged && return 0
    local key=/etc/munge/munge.key
    [ -s "$key" ] || { key=$DIR/munge.key; [ -s "$key" ] || mungekey -c -k "$key"; chown munge: "$key"; }
    # munged runs as its own user and insists on owning its directory.
    mkdir -p "$DIR/munge"
    chown munge: "$DIR/munge"
    chmod 755 "$DIR/munge"
    runuser -u munge -- munged --key-file="$key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
        --seed-file="$DIR/munge/munged.seed"
}

wait_until() { # wait_until SECONDS WHAT COMMAND...
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { say "timed out waiting for $what"; return 1; }
        sleep 0.5
    done
}

nodes_idle() { [ "$(sinfo -h -N -o %t | grep -cE '^(idle|mix|alloc)')" -eq ${#NODES[@]} ]; }

up() {
    [ "$(id -u)" -eq 0 ] || cannot "needs root (installs packages, runs slurmd)"
    command -v dpkg-query >/dev/null || cannot "not a Debian system (no dpkg)"
    mkdir -p "$DIR/log"
    install_packages
    if alive slurmctld && alive slurmd-sl1 && alive slurmd-sl2; then
        say "already up"
    else
        link_config
        write_config
        start_munge
        wait_until 10 munged test -S "$DIR/munge/munge.socket"
        alive slurmctld || slurmctld -i # -i: start even if state files of an earlier run are damaged
        for n in "${NODES[@]}"; do alive "slurmd-$n" || slurmd -N "$n"; done
        wait_until 30 "slurmctld" scontrol ping || { tail -20 "$DIR/log/slurmctld.log" >&2; exit 1; }
        wait_until 30 "the nodes to be idle" nodes_idle || { tail -20 "$DIR"/log/slurmd-*.log >&2; exit 1; }
    fi
    sinfo -N -o "%N %t %c %m %G" >&2
}

down() {
    local d pid
    for d in "${DAEMONS[@]}"; do
        alive "$d" || continue
        pid=$(cat "$(pidfile "$d")")
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        rm -f "$(pidfile "$d")"
        say "stopped $d ($pid)"
    done
    for f in slurm.conf gres.conf; do ours "$f" && rm "/etc/slurm/$f"; done
    return 0
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
