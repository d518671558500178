#!/usr/bin/env bash
# Training over several processes against one (issue 14), through the `ember` command line as a
# user runs it: samples/s from the display lines (the median of every window but the first).
#
#   bench/train/bench_processes.sh [--ember PATH] [--gpu-only | --cpu-only] [--iters N]
#                                  [--max-ranks P] [--hybrid | --hybrid-only] [--modes fp32,mixed]
#                                  [--gpu-counts "4 2 1"] [--host-exchange]
#
# GPU: DLRM Criteo-Kaggle (configs/dlrm_criteo_kaggle.json, batch 65536 per GPU, fp32 and mixed
# precision) on 1..G visible GPUs (G, then halving): one process with all of them, and one process
# per GPU under mpirun; on one GPU, a plain process against `mpirun -np 1` (the MPI job's own
# cost). --hybrid: also its HybridSparseEmbedding twin (configs/dlrm_criteo_kaggle_hybrid.json)
# with "frequent_rule": "traffic", the same way (--hybrid-only: that model alone). --host-exchange
# adds a column: one process per GPU with every key on the host exchange
# (EMBER_KEY_EXCHANGE=host), against the default, where the GPUs gather one-hot keys. CPU: configs/dlrm.json's model (batch 4096 per rank) on P = 1, 2, 4, ... ranks (up to
# half the cores), one process of P in-process ranks and P processes of one rank, each rank given
# cores / P OpenMP threads: weak scaling of the CPU path and the MPI collectives.
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
ember=""
iters=60
do_gpu=1
do_cpu=1
max_ranks=""
models=(dlrm_kaggle)
modes=(fp32 mixed)
gpu_counts=""
host_exchange=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ember) ember="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --gpu-only) do_cpu=0; shift ;;
    --cpu-only) do_gpu=0; shift ;;
    --max-ranks) max_ranks="$2"; shift 2 ;;
    --hybrid) models=(dlrm_kaggle dlrm_kaggle_hybrid_traffic); shift ;;
    --hybrid-only) models=(dlrm_kaggle_hybrid_traffic); shift ;;
    --modes) IFS=, read -r -a modes <<< "$2"; shift 2 ;;
    --gpu-counts) gpu_counts="$2"; shift 2 ;;
    --host-exchange) host_exchange=1; shift ;;
    *) echo "bench_processes: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -z "$ember" ]]; then
  for b in build-gpu build build-cpu; do
    if [[ -x "$here/$b/ember" ]]; then ember="$here/$b/ember"; break; fi
  done
fi
[[ -x "$ember" ]] || { echo "bench_processes: no ember binary (give --ember PATH)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "bench_processes: mpirun not found" >&2; exit 2; }
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
cores=$(nproc)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A configuration with the generated dataset's data layer and the run's settings.
make_config() {  # base dataset_dir out batch iters mixed [frequent_rule]
  python3 - "$@" << 'EOF'
import json, sys
base, data, out, batch, iters, mixed = sys.argv[1:7]
rule = sys.argv[7] if len(sys.argv) > 7 else ""
c = json.load(open(base))
d = json.load(open(data + "/dataset.json"))["data_layer"]
# The generated data's layer (format, files, counts), with the model's names and sparse inputs.
i, layer = next((i, l) for i, l in enumerate(c["layers"]) if l["type"] == "Data")
c["layers"][i] = {**d, "name": layer["name"], "label": layer["label"], "dense": layer["dense"],
                  "sparse": layer["sparse"]}
s = c["solver"]
s.update(batchsize=int(batch), batchsize_eval=int(batch), max_iter=int(iters),
         display=max(1, int(iters) // 6), eval_interval=0, snapshot=0)
s["mixed_precision"] = mixed == "1"
s.pop("gpu", None)
for l in c["layers"]:
    if rule and l["type"] == "HybridSparseEmbedding":
        l["sparse_embedding_hparam"]["frequent_rule"] = rule
json.dump(c, open(out, "w"), indent=1)
EOF
}

# Median samples/s of the display lines after the first (warm-up) window.
rate_of() {
  python3 -c '
import re, statistics, sys
r = [float(m.group(1)) for m in re.finditer(r"samples/s=([0-9.]+)", sys.stdin.read())]
print(f"{statistics.median(r[1:]) / 1e6:.3f}" if len(r) > 1 else "nan")'
}

run() {  # label, command...
  local label="$1"; shift
  local log="$work/$(echo "$label" | tr ' /=' '___').log"
  # No --model-out: the Kaggle model (17 GB of tables) is not worth writing here.
  if ! "$@" --no-progress --run-dir "$work/run_$RANDOM" > "$log" 2>&1; then
    echo "FAILED: $label" >&2; tail -5 "$log" >&2; echo "nan"; return
  fi
  rate_of < "$log"
}

gpu_list() { seq -s, 0 $(($1 - 1)); }
gpu_lists() { python3 -c "import sys; n=int(sys.argv[1]); print([[g] for g in range(n)])" "$1"; }

echo "bench_processes: $ember, $cores cores, $(date -u +%FT%TZ)"
if [[ $do_gpu == 1 ]] && command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  gpus=$(nvidia-smi -L | wc -l)
  nvidia-smi -L
  per_gpu=65536
  # Norm in 16 files, one per reader thread, as bench_train's datasets (the configuration's Raw
  # file is one stream).
  "$ember" datagen --like "$here/configs/dlrm_criteo_kaggle.json" --out "$work/kaggle" \
    --samples $((per_gpu * gpus * 12)) --eval-samples $per_gpu --format norm --files 16 > /dev/null
  printf '\n%-34s %-6s %10s %10s %10s\n' "DLRM Kaggle (M samples/s)" "mode" "1 process" "N procs" "per GPU"
  counts=()
  if [[ -n $gpu_counts ]]; then
    read -r -a counts <<< "$gpu_counts"
  else
    for ((n = gpus; n >= 1; n /= 2)); do counts+=("$n"); done
  fi
  declare -A base=()
  for model in "${models[@]}"; do
    model_config="$here/configs/dlrm_criteo_kaggle.json" rule=""
    if [[ $model == dlrm_kaggle_hybrid_traffic ]]; then
      model_config="$here/configs/dlrm_criteo_kaggle_hybrid.json" rule=traffic
    fi
    for mode in "${modes[@]}"; do
      mixed=$([[ $mode == mixed ]] && echo 1 || echo 0)
      for ((i = ${#counts[@]} - 1; i >= 0; --i)); do
        n=${counts[$i]}
        cfg="$work/${model}_${n}_${mixed}.json"
        make_config "$model_config" "$work/kaggle" "$cfg" $((per_gpu * n)) "$iters" "$mixed" $rule
        label="$model gpu $n"
        one=$(run "$label one $mode" "$ember" train "$cfg" --gpus "$(gpu_list "$n")")
        many=$(run "$label mpi $mode" "${mpirun[@]}" -np "$n" "$ember" train "$cfg" --mpi \
          --set "solver.gpu=$(gpu_lists "$n")")
        hosted=""
        if [[ $host_exchange == 1 && $n -gt 1 ]]; then
          hosted=$(run "$label host $mode" "${mpirun[@]}" -np "$n" -x EMBER_KEY_EXCHANGE=host \
            "$ember" train "$cfg" --mpi --set "solver.gpu=$(gpu_lists "$n")")
          hosted=" (keys on the host: $hosted)"
        fi
        [[ $n == 1 ]] && base[$model$mode]=$one
        scale=$(python3 -c "b,o,m,n=map(float,'${base[$model$mode]:-nan} $one $many $n'.split()); \
print(f'{o/b:.2f}x / {m/b:.2f}x' if b==b and b>0 else 'nan')")
        printf '%-34s %-6s %10s %10s %10s\n' "$n GPU(s), batch $((per_gpu * n))" "$mode" "$one" \
          "$many" "scaling $scale ($model)$hosted"
        # Where each process's input time went (process 0's "input (training)" line).
        grep -h "input (training)" "$work/${model}_gpu_${n}_mpi_${mode}.log" 2> /dev/null |
          sed 's/^.*input (training): /  processes: /; s/; process/\n  processes: process/g' || true
        grep -h "input (training)" "$work/${model}_gpu_${n}_host_${mode}.log" 2> /dev/null |
          sed 's/^.*input (training): /  keys on the host: /; s/; process/\n  keys on the host: process/g' || true
        echo "SUMMARY | processes | $model $mode gpus=$n | one process $one M | one process per GPU $many M$hosted | scaling (one / per GPU) $scale"
      done
    done
  done
fi

if [[ $do_cpu == 1 ]]; then
  per_rank=4096
  max_p=${max_ranks:-$((cores / 2))}; ((max_p >= 1)) || max_p=1
  "$ember" datagen --like "$here/configs/dlrm.json" --out "$work/small" \
    --samples $((per_rank * max_p * 12)) --eval-samples $per_rank > /dev/null
  printf '\n%-34s %10s %12s %18s\n' "DLRM (configs/dlrm.json), CPU" "1 process" "P processes" "scaling (1 / P)"
  base=""
  for ((p = 1; p <= max_p; p *= 2)); do
    cfg="$work/small_$p.json"
    make_config "$here/configs/dlrm.json" "$work/small" "$cfg" $((per_rank * p)) "$iters" 0
    threads=$((cores / p)); ((threads >= 1)) || threads=1
    one=$(OMP_NUM_THREADS=$cores run "cpu $p one" "$ember" train "$cfg" --device cpu --cpu-ranks "$p")
    many=$(run "cpu $p mpi" "${mpirun[@]}" -np "$p" -x OMP_NUM_THREADS=$threads "$ember" train "$cfg" \
      --device cpu --mpi)
    [[ $p == 1 ]] && base=$one
    scale=$(python3 -c "b,o,m=map(float,'$base $one $many'.split()); print(f'{o/b:.2f}x / {m/b:.2f}x')")
    printf '%-34s %10s %12s %18s\n' "$p rank(s), batch $((per_rank * p))" "$one" "$many" "$scale"
    grep -h "input (training)" "$work/cpu_${p}_mpi.log" 2> /dev/null |
      sed 's/^.*input (training): /  processes: /; s/; process/\n  processes: process/g' || true
    echo "SUMMARY | processes | dlrm cpu ranks=$p | one process $one M | one process per rank $many M | scaling $scale"
  done
fi
