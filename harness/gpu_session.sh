#!/usr/bin/env bash
# Everything the GPU issue measures, in one call on a machine with an NVIDIA GPU
# (docs/gpu-verification.md): Keras and libcst installed from .whl/ (harness/fetch_wheels.sh),
# then at once, each under its own time budget and each writing under $OUT as it goes:
#   the measurement matrix (jax and torch, verdict runs)      -> $OUT/m/<device>-<date>.jsonl
#   cuDNN's recurrent layers over a grid (harness.device_rnn)  -> $OUT/p/device-rnn-*.json
#   then the device's XLA plans beside the deviceless ones     -> $OUT/p/device-plans-*.json
#   the GPU test tier (pytest -m gpu)                          -> $OUT/pytest_gpu.log
# Budgets (seconds): MEASURE_BUDGET (default 380), RNN_BUDGET (120) then PLAN_BUDGET (180);
# the last runs started end within about 100 s of their budget.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/memlint-gpu}"
mkdir -p "$OUT/m" "$OUT/p"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
# a repeated call the same day resumes (at most 8 files come back: 4 logs, 2 + 2 data files)
cp data/measurements/*-"$(date +%F)".jsonl "$OUT/m/" 2>/dev/null
python3 -m harness.measure --backends jax,torch --matrix full --verdicts --jobs 5 \
    --time-budget "${MEASURE_BUDGET:-380}" --timeout 100 --out-dir "$OUT/m" \
    > "$OUT/measure.log" 2>&1 &
{ python3 -m harness.device_rnn --out-dir "$OUT/p" --time-budget "${RNN_BUDGET:-120}" \
      --workers 3 > "$OUT/device_rnn.log" 2>&1
  python3 -m harness.device_plan --out-dir "$OUT/p" --time-budget "${PLAN_BUDGET:-180}" \
      --workers 3 > "$OUT/device_plan.log" 2>&1; } &
python3 -m pytest -m gpu -q -s -p no:cacheprovider tests/test_gpu_tier.py \
    > "$OUT/pytest_gpu.log" 2>&1 &
wait
rm -f "$OUT"/m/cpu-*.jsonl
python3 -m harness.device_rnn --table "$OUT"/p/device-rnn-*.json 2>/dev/null | tail -n 4
python3 -m harness.compare "$OUT"/m/*.jsonl | head -20
tail -n 8 "$OUT/device_rnn.log" "$OUT/device_plan.log"
tail -n 5 "$OUT/pytest_gpu.log"
