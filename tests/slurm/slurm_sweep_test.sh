#!/usr/bin/env bash
# A sweep through a real Slurm: a single-node cluster on this machine, started in a temporary
# directory by this script (munged with a generated key, slurmctld -D and slurmd -D with a generated slurm.conf: one
# node with this machine's CPUs, proctrack/linuxproc, task/none, no accounting, no cgroups, so it runs in a container
# or chroot without systemd). Then:
#   1. a 4-point sweep submitted with `xgrad sweep --launcher slurm --submit` runs to the end: `sweep status` says 4
#      complete, every run has its summary.json, and `xgrad compare` reads the four runs;
#      submitting it again has nothing to submit;
#   2. in a 2-point sweep, one array task is cancelled while it trains (held mid-run with SIGSTOP, however fast the
#      machine, until scancel's SIGCONT and SIGTERM make it write its checkpoint and end); `sweep status` says running,
#      then interrupted; submitting the same sweep again submits that point alone, which resumes from its checkpoint
#      and completes with the metrics.csv of the same point trained without interruption.
# The daemons it started are stopped by their pids when it ends, however it ends. Where they cannot start, it says
# why (their logs) and what to install, and fails.
#
# Usage: slurm_sweep_test.sh XGRAD_BIN
set -uo pipefail

xgrad="$1"
fail() {
  echo "slurm_sweep: FAIL: $*" >&2
  exit 1
}

missing=()
for tool in munged slurmctld slurmd sbatch squeue sinfo scancel; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  fail "missing ${missing[*]}; install the Debian 12 packages slurmctld slurmd slurm-client munge" \
    "(apt-get install slurmctld slurmd slurm-client munge; ./run.sh test does)"
fi

tmp="$(mktemp -d /tmp/xgrad-slurm.XXXXXX)"
chmod 755 "$tmp"
daemons=()  # pids of the daemons this script started
show_logs() {
  for f in "$tmp"/log/* "$tmp"/munge/munged.log; do
    [ -f "$f" ] || continue
    echo "--- $f (last 25 lines)" >&2
    tail -n 25 "$f" >&2
  done
}
cleanup() {
  local status=$?
  # Jobs still in this cluster (a failed check leaves them) end before the daemons, so no run outlives the test.
  if [ ${#daemons[@]} -ge 2 ] && kill -0 "${daemons[1]}" 2>/dev/null && [ -n "$(squeue -h -o %A 2>/dev/null)" ]; then
    [ -n "${stopped:-}" ] && kill -CONT "$stopped" 2>/dev/null
    squeue -h -o %A 2>/dev/null | xargs -r scancel 2>/dev/null
    for _ in $(seq 1 75); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${daemons[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  if [ "$status" -ne 0 ]; then
    show_logs
    for f in "$tmp"/sweep-*/slurm-*.out "$tmp"/sweep-*/runs/*/train.log; do
      [ -f "$f" ] || continue
      echo "--- $f (last 5 lines)" >&2
      tail -n 5 "$f" >&2
    done
  fi
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Polls `$@` every $interval seconds until it succeeds, for up to $deadline seconds (a sanitizer build on a busy
# machine is slow); fails the test naming `what` otherwise.
deadline=180
interval=0.2
wait_for() {
  local what="$1"
  shift
  local end=$((SECONDS + deadline))
  until "$@"; do
    [ $SECONDS -lt $end ] || fail "waited ${deadline} s for $what"
    sleep "$interval"
  done
}

# munge: its own key, socket, pid, log and seed files in the temporary directory.
mkdir -p "$tmp/munge" "$tmp/log" "$tmp/state" "$tmp/spool"
chmod 700 "$tmp/munge"
if command -v mungekey >/dev/null 2>&1; then
  mungekey --create --keyfile="$tmp/munge/munge.key" || fail "mungekey could not create a key"
else
  dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 600 "$tmp/munge/munge.key"
socket="$tmp/munge/munge.socket"
munged --foreground --force --socket="$socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" \
  >"$tmp/log/munged.out" 2>&1 &
daemons+=($!)
deadline=30 wait_for "munged's socket $socket" test -S "$socket"

# Two free TCP ports for slurmctld and slurmd (another Slurm may hold the default 6817/6818).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=0
for _ in $(seq 1 50); do
  p=$((20000 + RANDOM % 30000))
  if port_free "$p" && port_free $((p + 1)); then port=$p; break; fi
done
[ "$port" -gt 0 ] || fail "found no two free TCP ports"

host="$(hostname -s)"
user="$(id -un)"
conf="$tmp/slurm.conf"
cat >"$conf" <<EOF
ClusterName=xgradtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=10
PlugStackConfig=$tmp/plugstack.conf
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=500 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
: >"$tmp/plugstack.conf"
export SLURM_CONF="$conf"
slurmctld -D -f "$conf" >"$tmp/log/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -f "$conf" -N "$host" >"$tmp/log/slurmd.out" 2>&1 &
daemons+=($!)
node_idle() {
  local names=(munged slurmctld slurmd) i
  for i in 0 1 2; do
    kill -0 "${daemons[$i]}" 2>/dev/null ||
      fail "${names[$i]} exited at start (its log is below; Debian 12 packages: munge slurmctld slurmd slurm-client)"
  done
  [ "$(sinfo -h -N -o %t 2>/dev/null)" = "idle" ]
}
deadline=60 wait_for "the Slurm node to be idle (sinfo: $(sinfo -h -N -o %t 2>&1 | head -1))" node_idle ||
  fail "slurmctld/slurmd did not start"
echo "slurm_sweep: single-node Slurm up on ports $port/$((port + 1)) in $tmp"

# The state column of `xgrad sweep status DIR` for point $2.
state_of() { "$xgrad" sweep status "$1" | awk -v i="$2" '$1 == i { print $3 }'; }
# Whether job $1 has left the queue (every array task ended).
job_gone() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
# Submits the sweep in dir $1 with the flags after it; sets `job` and keeps sbatch's line in `submitted`.
submit() {
  local dir="$1"
  shift
  submitted="$("$xgrad" sweep --out "$dir" --launcher slurm --submit --max-parallel 2 "$@" 2>&1)" ||
    fail "xgrad sweep --launcher slurm --submit: $submitted"
  echo "$submitted"
  job="$(sed -n 's/^submitted job \([0-9]*\):.*/\1/p' <<<"$submitted")"
  [ -n "$job" ] || fail "no job id in: $submitted"
}
common=(--d-k 4 --arms adamw@0.01 --d-model 16 --batch-size 8 --print-every 1000)

# 1. Four points, submitted, waited for, compared.
a="$tmp/sweep-a"
submit "$a" "${common[@]}" --scale none,sqrt_dk --seeds 0,1 --steps 200
grep -q -- "--array=0-3%2 " <<<"$submitted" || fail "the first submission is not --array=0-3%2: $submitted"
wait_for "job $job to end" job_gone "$job"
status="$("$xgrad" sweep status "$a")"
echo "$status"
grep -q "^4 points: 4 complete$" <<<"$status" || fail "sweep status after the job: $status"
for run in "$a"/runs/*/; do
  [ -f "$run/summary.json" ] || fail "no summary.json in $run"
done
[ "$(ls "$a"/runs | wc -l)" -eq 4 ] || fail "$a/runs holds $(ls "$a"/runs | wc -l) runs, not 4"
for i in 0 1 2 3; do
  grep -q "grid point $i of 4" "$a/slurm-${job}_$i.out" || fail "array task $i's output: $(cat "$a/slurm-${job}_$i.out")"
done
compared="$("$xgrad" compare "$a" --plots false 2>&1)" || fail "xgrad compare: $compared"
grep -q "^4 runs in 2 arms" <<<"$compared" || fail "compare did not read 4 runs: $compared"
! grep -q "incomplete" <<<"$compared" || fail "compare calls a run incomplete: $compared"
again="$("$xgrad" sweep --out "$a" --launcher slurm --submit --max-parallel 2 "${common[@]}" --scale none,sqrt_dk \
  --seeds 0,1 --steps 200 2>&1)" || fail "submitting a complete sweep again: $again"
grep -q "nothing to submit" <<<"$again" || fail "a complete sweep submitted again: $again"

# 2. One array task cancelled mid-run, then the sweep submitted again.
b="$tmp/sweep-b"
run1="$b/runs/dk4-none-adamw-lr0.01-s1"
args=("${common[@]}" --scale none --seeds 0,1 --steps 10000)
submit "$b" "${args[@]}"
has_checkpoint() { [ -f "$run1/checkpoint.safetensors" ] && [ "$(state_of "$b" 1)" = running ]; }
interval=0.02 wait_for "point 1 to be running with a checkpoint" has_checkpoint
# The task stays mid-run, however fast this machine, until Slurm cancels it (it sends SIGCONT before SIGTERM).
pid="$(head -n 1 "$run1/.lock")"
kill -STOP "$pid" || fail "cannot stop the process training point 1 (pid $pid)"
stopped=$pid
status="$("$xgrad" sweep status "$b")"
echo "$status"
grep -Eq "^ +1 +dk4-none-adamw-lr0.01-s1 +running +pid $pid, [0-9]+ step\(s\) of 10000 logged" <<<"$status" ||
  fail "sweep status while point 1 trains: $status"
scancel "${job}_1" || fail "scancel ${job}_1"
task_gone() { [ -z "$(squeue -h -j "${job}_1" 2>/dev/null)" ]; }
wait_for "array task ${job}_1 to end" task_gone
interrupted() { [ "$(state_of "$b" 1)" = interrupted ]; }
wait_for "point 1 to be interrupted" interrupted
status="$("$xgrad" sweep status "$b")"
echo "$status"
grep -Eq "^ +1 +dk4-none-adamw-lr0.01-s1 +interrupted +checkpoint at step [1-9][0-9]* of 10000" <<<"$status" ||
  fail "sweep status after scancel: $status"
grep -q "stopped by SIGTERM" "$run1/train.log" ||
  fail "the cancelled run did not write its checkpoint on SIGTERM: $(tail -3 "$run1/train.log")"
wait_for "job $job to end" job_gone "$job"
[ "$(state_of "$b" 0)" = complete ] || fail "point 0 after its task: $("$xgrad" sweep status "$b")"
first_job=$job
submit "$b" "${args[@]}"
grep -q -- "--array=1%2 " <<<"$submitted" || fail "the resubmission is not point 1 alone: $submitted"
wait_for "job $job to end" job_gone "$job"
status="$("$xgrad" sweep status "$b")"
echo "$status"
grep -q "^2 points: 2 complete$" <<<"$status" || fail "sweep status after the resubmission: $status"
grep -q "resuming from the checkpoint at step [1-9]" "$b/slurm-${job}_1.out" ||
  fail "the resubmitted point did not resume: $(cat "$b/slurm-${job}_1.out")"
[ ! -e "$b/slurm-${job}_0.out" ] || fail "the resubmission ran point 0 again"
rows=$(($(wc -l <"$run1/metrics.csv") - 1))
[ "$rows" -eq 10000 ] || fail "the resumed run's metrics.csv has $rows rows, not 10000"
# The cancelled and resumed point wrote the metrics.csv of the same point trained without interruption (every
# column but step_ms, the wall time).
"$xgrad" train --config "$b/configs/dk4-none-adamw-lr0.01-s1.json" --out "$tmp/uninterrupted" >/dev/null 2>&1 ||
  fail "xgrad train of point 1's config file failed"
without_timing() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step_ms") skip = i }
  { line = ""; for (i = 1; i <= NF; i++) if (i != skip) line = line $i ","; print line }' "$1"; }
[ "$(without_timing "$run1/metrics.csv" | grep -c ,)" -eq 10001 ] || fail "cannot read $run1/metrics.csv"
cmp -s <(without_timing "$run1/metrics.csv") <(without_timing "$tmp/uninterrupted/metrics.csv") ||
  fail "the resumed point's metrics.csv differs from an uninterrupted run's"
compared="$("$xgrad" compare "$b" --plots false 2>&1)" || fail "xgrad compare: $compared"
grep -q "^2 runs in 1 arm\b" <<<"$compared" || fail "compare did not read 2 runs: $compared"
echo "slurm_sweep: OK (jobs $first_job and $job; $SECONDS s)"
