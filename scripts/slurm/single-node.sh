#!/usr/bin/env bash
# A throw-away single-node Slurm cluster on this machine (slurmctld + slurmd on
# localhost, authenticated by a private munged), for cli/tests/slurm.rs and for trying
# docs/scale-out.md's recipe without a cluster. Needs Debian's slurm-wlm and munge
# (`apt-get install slurm-wlm munge`) and root (slurmd runs jobs as their submitter).
# No systemd: the daemons are started directly, in the foreground of this script's
# background jobs, and everything they write stays in DIR.
#
#   bash scripts/slurm/single-node.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`
#   bash scripts/slurm/single-node.sh stop DIR
#
# Ports: SLURM_TEST_PORT (default 16817) for slurmctld and the next one for slurmd.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
    echo "usage: single-node.sh start|stop DIR" >&2
    exit 2
fi
PATH=$PATH:/usr/sbin:/sbin

stop() {
    for pidfile in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(cat "$pidfile")
        if [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; then
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$pidfile"
    done
}

if [[ "$cmd" == stop ]]; then
    stop
    exit 0
fi
if [[ "$cmd" != start ]]; then
    echo "single-node.sh: unknown command '$cmd' (start|stop)" >&2
    exit 2
fi
for tool in munged slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || { echo "single-node.sh: $tool is not installed (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
if [[ "$(id -u)" != 0 ]]; then
    echo "single-node.sh: needs root (slurmd starts jobs as their submitter)" >&2
    exit 1
fi

mkdir -p "$dir"/{spool,state,munge}
dir=$(cd "$dir" && pwd)
chmod 700 "$dir/munge"
port=${SLURM_TEST_PORT:-16817}
node=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)

# munge: a private key and socket, so a system munged (if any) is left alone.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
    </dev/null >"$dir/munged.out" 2>&1

cat > "$dir/slurm.conf" <<CONF
ClusterName=causalbench-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"

# Foreground daemons in the background: no systemd, no double fork to lose track of.
slurmctld -D -i >"$dir/slurmctld.out" 2>&1 &
slurmd -D -N "$node" >"$dir/slurmd.out" 2>&1 &

# Ready when the node takes jobs.
for _ in $(seq 150); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        echo "export SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "single-node.sh: the node did not become idle in 30 s; logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/slurmctld.out" "$dir/slurmd.out" >&2 || true
stop
exit 1
