#!/usr/bin/env bash
# Bring up / tear down a throw-away single-node SLURM cluster on 127.0.0.1, for the SLURM tests.
#
#   bash tests/slurm_cluster.sh up       # install (if missing) + start munged, mariadbd, slurmdbd, slurmctld, slurmd
#   bash tests/slurm_cluster.sh down     # stop ONLY the daemons this script started (by their pidfiles)
#   bash tests/slurm_cluster.sh status   # what runs, and the node state
#   bash tests/slurm_cluster.sh env      # prints `export SLURM_CONF=...` (eval it to use sbatch/sacct by hand)
#   bash tests/slurm_cluster.sh clean    # down + delete the state directory
#
# Everything (config, keys, database, logs, pidfiles) lives under $SLURM_TEST_DIR
# (default /tmp/distill_sweep_slurm); nothing is written to /etc/slurm or /etc/munge. Clients (sbatch,
# sacct, srun, submitit) find the cluster through SLURM_CONF=$SLURM_TEST_DIR/etc/slurm.conf; slurmdbd
# reads slurmdbd.conf from the same directory. The only system changes: the apt packages, and a line in
# /etc/hosts if the host name does not resolve to a loopback address (srun hangs otherwise).
# Needs root (slurmd and slurmctld run as root here; there is no systemd on the CI machines).
set -euo pipefail

DIR="${SLURM_TEST_DIR:-/tmp/distill_sweep_slurm}"
PORT_BASE="${SLURM_TEST_PORT_BASE:-16810}"   # away from the default 6817-6819/3306 of any real install
CTLD_PORT=$((PORT_BASE + 7))
SLURMD_PORT=$((PORT_BASE + 8))
DBD_PORT=$((PORT_BASE + 9))
DB_PORT=$((PORT_BASE + 6))
CLUSTER="distill"
NODE="localhost"
PARTITION="debug"
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
# Marker in the environment of every daemon we start (and so of their children, e.g. slurmstepd):
# lets `down` find leftovers of OUR cluster without touching anyone else's processes.
MARKER="DISTILL_SWEEP_SLURM_DIR=$DIR"

ETC="$DIR/etc" RUN="$DIR/run" LOG="$DIR/log" STATE="$DIR/state"
MUNGE_SOCK="$RUN/munge.socket" MUNGE_KEY="$ETC/munge.key"
DB_DATA="$STATE/mysql" DB_SOCK="$RUN/mysqld.sock"
export SLURM_CONF="$ETC/slurm.conf"

log() { printf '[slurm_cluster] %s\n' "$*"; }
die() {
    printf '[slurm_cluster] ERROR: %s\n' "$*" >&2
    exit 1
}

# ---------------------------------------------------------------- process helpers
pidfile_of() { echo "$RUN/$1.pid"; }

# Prints the pid if the daemon named $1 runs from our pidfile (and the pid really is that program:
# a stale pidfile whose pid got reused must not make us skip a start or kill a stranger).
running_pid() {
    local name=$1 pf pid comm
    pf=$(pidfile_of "$name")
    [[ -s $pf ]] || return 1
    pid=$(tr -dc '0-9' <"$pf")
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    [[ $comm == "$name" ]] || return 1
    echo "$pid"
}

# wait_for SECONDS DESCRIPTION CMD...: polls CMD every 0.5 s.
wait_for() {
    local secs=$1 what=$2
    shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < end)) || return 1
        sleep 0.5
    done
}

stop_daemon() {
    local name=$1 pid
    if ! pid=$(running_pid "$name"); then
        rm -f "$(pidfile_of "$name")"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local end=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < end)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name ($pid) ignored SIGTERM for 20 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$(pidfile_of "$name")"
    log "stopped $name ($pid)"
}

# Processes carrying our marker (daemons we started and their children such as slurmstepd).
marked_pids() {
    local f pid
    for f in /proc/[0-9]*/environ; do
        pid=${f#/proc/}
        pid=${pid%/environ}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        # (unreadable entries, e.g. other users' or vanished processes, are skipped quietly)
        if { tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qxF "$MARKER"; then echo "$pid"; fi
    done
}

# ---------------------------------------------------------------- steps
need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (slurmd/slurmctld/munged/mariadbd are started as root)"
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        log "packages present"
        return
    fi
    command -v apt-get >/dev/null || die "packages missing (${missing[*]}) and apt-get is not available"
    log "installing ${missing[*]} (apt-get)"
    local t0=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    # wait for a concurrent apt/dpkg (another user installing) instead of failing at once
    local lock=(-o DPkg::Lock::Timeout=300)
    apt-get "${lock[@]}" update -qq >"$LOG/apt.log" 2>&1 || die "apt-get update failed (see $LOG/apt.log)"
    # policy-rc.d 101 stops maintainer scripts from trying to start the packages' own daemons.
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
    fi
    local rc=0
    apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >>"$LOG/apt.log" 2>&1 || rc=$?
    ((created_policy)) && rm -f "$policy"
    ((rc == 0)) || die "apt-get install failed (see $LOG/apt.log)"
    log "installed in $((SECONDS - t0)) s"
}

check_hosts() {
    local host addr
    host=$(hostname)
    addr=$(getent ahostsv4 "$host" 2>/dev/null | awk 'NR==1{print $1}')
    if [[ $addr == 127.* ]]; then
        log "host name $host resolves to $addr"
        return
    fi
    # NoInAddrAny makes srun bind to the address its host name resolves to: it must be loopback.
    echo "127.0.0.1 $host  # added by distill_sweep tests/slurm_cluster.sh" >>/etc/hosts
    log "host name $host resolved to '${addr:-nothing}': added '127.0.0.1 $host' to /etc/hosts"
}

node_line() {
    # slurmd -C reports the hardware as slurmd itself will see it; a node configured with more than
    # that would be drained.
    local detected cpus mem
    detected=$(slurmd -C 2>/dev/null | sed -n 1p || true)
    if [[ $detected == NodeName=* ]]; then
        sed "s/^NodeName=[^ ]*/NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE/" <<<"$detected"
        return
    fi
    cpus=$(nproc)
    mem=$(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo)
    echo "NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus RealMemory=$mem"
}

write_config() {
    mkdir -p "$ETC" "$RUN" "$LOG" "$STATE/ctld" "$STATE/slurmd" "$DB_DATA"
    chmod 700 "$ETC"
    if [[ ! -s $MUNGE_KEY ]]; then
        dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
    fi
    chmod 400 "$MUNGE_KEY"
    if [[ ! -s $ETC/db.pass ]]; then
        (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$ETC/db.pass")
    fi

    local node cpus mem
    node=$(node_line)
    cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
    mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    local tmp="$ETC/slurm.conf.tmp"
    cat >"$tmp" <<EOF
# generated by tests/slurm_cluster.sh; rewritten on every \`up\`
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire (s; default 120): the lifetime of job credentials, and so how long SLURM holds a requeued job
# back (cred_expire + 1 s) until slurmd has forgotten the credential it revoked; a requeued job started before
# that is killed as "Job credential revoked". The preemption tests wait that long, then start it at once.
AuthInfo=socket=$MUNGE_SOCK,cred_expire=10
CredType=cred/munge
# everything on loopback (also what the commands and srun bind to)
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
# no cgroups in the CI containers
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without a default, a job asking no memory takes the whole node and array tasks run one at a time
DefMemPerCPU=$((mem / cpus))
SlurmdParameters=config_overrides
ReturnToService=2
# quick cancellation (scancel, time limits)
KillWait=5
MinJobAge=60
MailProg=/bin/true
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
# accounting is needed: submitit decides a job died without a result from sacct; with
# accounting_storage/none it polls forever
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# the munge socket for talking to slurmdbd (AuthInfo alone covers only slurmctld/slurmd traffic)
AccountingStoragePass=$MUNGE_SOCK
$node State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$tmp" "$ETC/slurm.conf"

    # slurmdbd refuses a slurmdbd.conf readable by others (it holds the DB password).
    (
        umask 077
        cat >"$ETC/slurmdbd.conf.tmp" <<EOF
# generated by tests/slurm_cluster.sh
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdAddr=127.0.0.1
DbdHost=$NODE
DbdPort=$DBD_PORT
CommunicationParameters=NoInAddrAny
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$ETC/db.pass")
StorageLoc=slurm_acct_db
EOF
    )
    chmod 600 "$ETC/slurmdbd.conf.tmp"
    mv "$ETC/slurmdbd.conf.tmp" "$ETC/slurmdbd.conf"
    log "config in $ETC (node: $node)"
}

munge_ok() { munge -n -S "$MUNGE_SOCK" 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1; }

start_munge() {
    if pid=$(running_pid munged); then
        log "munged already running ($pid)"
        return
    fi
    env "$MARKER" munged --socket="$MUNGE_SOCK" --key-file="$MUNGE_KEY" --pid-file="$(pidfile_of munged)" \
        --log-file="$LOG/munged.log" --seed-file="$STATE/munged.seed" --force \
        </dev/null >>"$LOG/munged.out" 2>&1 9>&- || die "munged failed to start (see $LOG/munged.log)"
    wait_for 15 munge munge_ok || die "munged does not answer (see $LOG/munged.log)"
    log "munged started ($(running_pid munged))"
}

db_client() { mariadb --no-defaults --socket="$DB_SOCK" -uroot "$@"; }

start_mariadb() {
    if pid=$(running_pid mariadbd); then
        log "mariadbd already running ($pid)"
    else
        if [[ ! -d $DB_DATA/mysql ]]; then
            mariadb-install-db --no-defaults --datadir="$DB_DATA" --user=root --skip-test-db \
                --auth-root-authentication-method=socket >"$LOG/mariadb-install.log" 2>&1 ||
                die "mariadb-install-db failed (see $LOG/mariadb-install.log)"
        fi
        # mariadbd does not daemonize: detach it ourselves, stdio away from the caller's pipes.
        # Native AIO is off because io_setup is not available in every sandbox (gVisor).
        setsid env "$MARKER" mariadbd --no-defaults --datadir="$DB_DATA" --socket="$DB_SOCK" \
            --pid-file="$(pidfile_of mariadbd)" --port="$DB_PORT" --bind-address=127.0.0.1 --user=root \
            --skip-name-resolve --log-error="$LOG/mariadbd.log" --innodb-use-native-aio=0 \
            --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 </dev/null >>"$LOG/mariadbd.out" 2>&1 9>&- &
        wait_for 60 mariadbd db_client -e 'SELECT 1' || die "mariadbd did not come up (see $LOG/mariadbd.log)"
        wait_for 10 mariadbd running_pid mariadbd || die "mariadbd wrote no pidfile (see $LOG/mariadbd.log)"
        log "mariadbd started ($(running_pid mariadbd))"
    fi
    local pass
    pass=$(cat "$ETC/db.pass")
    db_client -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
        ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
        die "could not create the accounting database"
}

dbd_ok() { sacctmgr -n -P list cluster format=Cluster; }

start_slurmdbd() {
    if pid=$(running_pid slurmdbd); then
        log "slurmdbd already running ($pid)"
    else
        env "$MARKER" slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1 9>&- ||
            die "slurmdbd failed to start (see $LOG/slurmdbd.log)"
        wait_for 60 slurmdbd dbd_ok || die "slurmdbd does not answer (see $LOG/slurmdbd.log)"
        log "slurmdbd started ($(running_pid slurmdbd))"
    fi
    if ! dbd_ok | grep -qxF "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
        log "cluster $CLUSTER registered in slurmdbd"
    fi
}

ctld_ok() { scontrol ping | grep -q 'is UP'; }

start_slurmctld() {
    if pid=$(running_pid slurmctld); then
        log "slurmctld already running ($pid)"
        return
    fi
    env "$MARKER" slurmctld </dev/null >>"$LOG/slurmctld.out" 2>&1 9>&- ||
        die "slurmctld failed to start (see $LOG/slurmctld.log)"
    wait_for 60 slurmctld ctld_ok || die "slurmctld does not answer (see $LOG/slurmctld.log)"
    log "slurmctld started ($(running_pid slurmctld))"
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | sed -n 1p; }
node_idle() { [[ $(node_state) == idle* || $(node_state) == mixed* || $(node_state) == allocated* ]]; }

start_slurmd() {
    if pid=$(running_pid slurmd); then
        log "slurmd already running ($pid)"
    else
        env "$MARKER" slurmd -N "$NODE" </dev/null >>"$LOG/slurmd.out" 2>&1 9>&- ||
            die "slurmd failed to start (see $LOG/slurmd.log)"
        wait_for 15 slurmd running_pid slurmd || die "slurmd did not start (see $LOG/slurmd.log)"
        log "slurmd started ($(running_pid slurmd))"
    fi
    # A node left down/drained by an earlier run comes back with resume.
    if wait_for 10 node node_idle; then :; else
        case $(node_state) in
        down* | drain* | drained* | fail*)
            scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
            ;;
        esac
        wait_for 50 node node_idle || die "node $NODE is '$(node_state)', not idle (see $LOG/slurmd.log, $LOG/slurmctld.log)"
    fi
    log "node $NODE is $(node_state)"
}

# ---------------------------------------------------------------- commands
cmd_up() {
    need_root
    local t0=$SECONDS
    mkdir -p "$LOG"
    install_packages
    check_hosts
    write_config
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmd
    log "up in $((SECONDS - t0)) s; use: export SLURM_CONF=$SLURM_CONF"
}

cmd_down() {
    need_root
    # Cancel what still runs, so no job (or its slurmstepd) outlives the cluster.
    if running_pid slurmctld >/dev/null; then
        local jobs
        jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
        if [[ -n ${jobs// /} ]]; then
            log "cancelling jobs: $jobs"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            wait_for 20 jobs bash -c '[[ -z $(squeue -h -o %A 2>/dev/null) ]]' ||
                log "jobs still listed after 20 s; stopping anyway"
        fi
    fi
    local name
    for name in slurmd slurmctld slurmdbd mariadbd munged; do stop_daemon "$name"; done
    # Children of our daemons (slurmstepd, ...) that outlived them.
    local left
    left=$(marked_pids | tr '\n' ' ')
    if [[ -n ${left// /} ]]; then
        log "killing leftover processes of this cluster: $left"
        # shellcheck disable=SC2086
        kill -TERM $left 2>/dev/null || true
        sleep 1
        left=$(marked_pids | tr '\n' ' ')
        # shellcheck disable=SC2086
        [[ -z ${left// /} ]] || kill -KILL $left 2>/dev/null || true
    fi
    log "down (state and logs kept in $DIR)"
}

# exit status: 0 all daemons run, 3 none runs (nor any other process of this cluster), 1 something between
cmd_status() {
    local name pid running=0
    for name in munged mariadbd slurmdbd slurmctld slurmd; do
        if pid=$(running_pid "$name"); then
            log "$name running ($pid)"
            running=$((running + 1))
        else
            log "$name not running"
        fi
    done
    local left
    left=$(marked_pids | tr '\n' ' ')
    [[ -z ${left// /} ]] || log "processes of this cluster: $left"
    if running_pid slurmctld >/dev/null; then
        sinfo -N -o '%N %T %c %m' 2>&1 | sed 's/^/[slurm_cluster]   /'
    fi
    log "SLURM_CONF=$SLURM_CONF"
    if ((running == 5)); then return 0; fi
    if ((running == 0)) && [[ -z ${left// /} ]]; then return 3; fi
    return 1
}

# One up/down at a time per cluster directory (two test sessions starting together). The daemons are
# started with fd 9 closed: a daemon holding it would hold the lock for good.
with_lock() {
    mkdir -p "$DIR"
    if command -v flock >/dev/null; then
        exec 9>"$DIR/.lock"
        flock -w 600 9 || die "another slurm_cluster.sh holds $DIR/.lock"
    fi
    "$@"
}

case "${1:-}" in
up) with_lock cmd_up ;;
down) with_lock cmd_down ;;
status) cmd_status ;;
env) echo "export SLURM_CONF=$SLURM_CONF" ;;
clean)
    with_lock cmd_down
    rm -rf "$DIR"
    log "removed $DIR"
    ;;
*)
    echo "usage: $0 {up|down|status|env|clean}" >&2
    exit 2
    ;;
esac
