#!/usr/bin/env bash
# The temporal learners at 64 px on one GPU: every (row, seed) of benchmarks/temporal_images.py in its own process,
# all at once. A 200-step probe of every process first measures the step time; the main run then takes the largest
# multiple of 1,000 steps (at most MAX_STEPS) that ends before DEADLINE seconds; the untrained rows, the table and the
# figure come from one last call on the merged results (which it finds keyed and reuses).
# usage: bash results/temporal/gpu64/run.sh STORE OUT DEADLINE_S [SIZE] [DEVICE] [MAX_STEPS]
# (PROBE and UNIT, 200 and 1000 steps, are settable for a quick dry run on a CPU; STEPS skips the probe; SEEDS)
set -euo pipefail
store=$1 out=$2 deadline=$3 size=${4:-64} device=${5:-cuda} max_steps=${6:-30000} probe=${PROBE:-200} unit=${UNIT:-1000}
rows="time_contrastive citris_vae citris_vae_classifier ivae" seeds=${SEEDS:-0 1}
bench=benchmarks/temporal_images.py work=$(mktemp -d) start=$(date +%s)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
common=(--store "$store" --size "$size" --threads 1 --device "$device")
parallel() {  # steps, tag: every (row, seed) at once, each in its own folder
  for r in $rows; do for s in $seeds; do
    python3 "$bench" "${common[@]}" --rows "$r" --seeds "$s" --steps "$1" --out "$work/$2_${r}_$s" \
      > "$work/$2_${r}_$s.log" 2>&1 &
  done; done
  wait
  for f in "$work/$2"_*.log; do grep -q Traceback "$f" && { echo "== $f"; tail -n 15 "$f"; }; done; true
}
if [ -n "${STEPS:-}" ]; then steps=$STEPS; else  # STEPS set: no probe
parallel "$probe" probe
probe_end=$(date +%s)
steps=$(python3 - "$work" "$start" "$probe_end" "$deadline" "$max_steps" "$probe" "$unit" <<'PY'
import glob, json, sys
work, start, probe_end, deadline, cap, probe, unit = sys.argv[1], *map(int, sys.argv[2:])
train = max(r["train_seconds"] for f in glob.glob(f"{work}/probe_*/results.json")
            for r in json.load(open(f))["runs"])
overhead = (probe_end - start) - train  # loading and scoring, which do not grow with the steps
left = deadline - (probe_end - start) - overhead - 90  # 90 s for the last call
print(min(cap, max(unit, int(left / max(train, 1e-3) * probe) // unit * unit)))
PY
)
echo "probe ($probe steps): $((probe_end - start)) s; main run: $steps steps"
grep -h "seed" "$work"/probe_*.log || true
fi
parallel "$steps" main
mkdir -p "$out"
python3 - "$work" "$out" <<'PY'
import glob, json, sys
runs = [r for f in sorted(glob.glob(f"{sys.argv[1]}/main_*/results.json")) for r in json.load(open(f))["runs"]]
json.dump({"meta": {}, "runs": runs}, open(f"{sys.argv[2]}/results.json", "w"))
PY
python3 "$bench" "${common[@]}" --seeds $seeds --steps "$steps" --out "$out"
echo "total: $(( $(date +%s) - start )) s"
