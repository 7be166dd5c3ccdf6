#!/usr/bin/env bash
# Under mpirun or srun no launcher runs: every process is `prism task PLAN` and finds its task
# from its rank variable; worker:0's process serves the coordinator at the plan's address.
set -uo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d)
cleanup() { pkill -KILL -f "task $work/plan.pb" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
# Fixed ports (the plan's), away from other tests' ephemeral ones.
base=$(( 20000 + ($$ % 20000) ))
cat >"$work/cluster.yaml" <<YAML
hosts:
  - name: a
    address: 127.0.0.1
    devices: [cpu:0, cpu:1]
    ps: 1
    base_port: $((base + 1))
port: $base
YAML
timeout 60 "$prism" partition "$source_dir/models/embedding_classifier.prism" \
  --cluster "$work/cluster.yaml" --batch 64 -o "$work/plan.pb" >/dev/null || exit 1
# ARGS...: every rank's process with ARGS, as mpirun or srun would start them.
run_ranks() {
  pids=()
  for rank in 0 1 2; do
    # Ranks 0 and 1 as Open MPI starts them, rank 2 as Slurm does.
    if [ $rank -lt 2 ]; then
      OMPI_COMM_WORLD_RANK=$rank timeout 120 "$prism" task "$work/plan.pb" \
        --data zipf:100000,tokens=20,classes=10 --steps 10 --no-eval "$@" >"$work/out.$rank" 2>&1 &
    else
      SLURM_PROCID=$rank timeout 120 "$prism" task "$work/plan.pb" \
        --data zipf:100000,tokens=20,classes=10 --steps 10 --no-eval "$@" >"$work/out.$rank" 2>&1 &
    fi
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for rank in 0 1 2; do echo "--- rank $rank"; cat "$work/out.$rank"; done
  [ $status -eq 0 ] && grep -q "^done: 10 steps" "$work/out.0"
}
run_ranks || exit 1
# With TLS: one command line for every rank, {task} naming each one's certificate; worker:0's
# process serves the coordinator with worker:0's certificate.
if command -v openssl >/dev/null; then
  source "$(dirname "$0")/make-certs.sh"
  make_certs "$work/certs" worker:0 worker:1 ps:0
  run_ranks --tls-ca "$work/certs/ca.pem" --tls-cert "$work/certs/{task}.pem" \
    --tls-key "$work/certs/{task}.key" || exit 1
fi
