#!/usr/bin/env bash
# Runs on the lent GPU machine what scripts/gpu/prepare.sh made here (out/gpu/): the
# Vulkan tests, then IRON's and llama.cpp's Vulkan benchmarks on the same SmolLM2-shaped file
# (random weights), in turns, and the table of both with their ratio. About 3 minutes on a GPU;
# files for the session land in $OUT (tests.log, iron.log, llama.log, summary.md).
#   run(command="bash scripts/gpu/run.sh", carry=["out/gpu"], timeout_s=420)
# Here, on lavapipe, it runs too (then its figures are a CPU's; iron bench's device line says so):
# IRON_GPU_PROMPT and IRON_GPU_GEN (512 and 128) make its tests shorter there.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=out/gpu
logs=${OUT:-/tmp/iron-gpu}
mkdir -p "$logs"
[ -x $out/iron ] || { echo "error: $out/iron is missing: run scripts/gpu/prepare.sh first (and carry out/gpu)" >&2; exit 1; }
# The loader comes in out/gpu/lib; the driver is the machine's (NVIDIA's ICD where it is there).
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $nvidia_icd ] && [ -z "${VK_DRIVER_FILES:-}" ] && export VK_DRIVER_FILES=$nvidia_icd
export LD_LIBRARY_PATH=$PWD/$out/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export IRON_SHARED_DIR=$PWD/$out/shared
# iron_tests reads its goldens from the source tree it was built in: that path, here.
built_in=$(cat $out/source_dir)
if [ "$built_in" != "$PWD" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"
fi

echo "=== devices"
$out/iron info --devices
echo "=== Vulkan tests"
timeout 150 $out/iron_tests --gtest_brief=1 \
  --gtest_filter='Vulkan*:OpKernels.*:Attention.*EveryDevice*:SpecRows.*:CarriedLoop*:-VulkanSmolLM2.*' 2>&1 | tee "$logs/tests.log" | tail -25
echo "=== SmolLM2-shaped GGUF, random weights"
model=/tmp/smollm2-random.gguf
python3 scripts/gpu/random_weights.py $out/smollm2.header $model
echo "=== benchmarks, in turns"
: > "$logs/iron.log"
: > "$logs/llama.log"
prompt=${IRON_GPU_PROMPT:-512} gen=${IRON_GPU_GEN:-128}
for turn in 1 2; do
  timeout 100 $out/iron bench --device vulkan -m $model -p "$prompt" -n "$gen" -r 3 2>&1 | tee -a "$logs/iron.log"
  timeout 100 $out/llama-bench -m $model -p "$prompt" -n "$gen" -r 3 -ngl 99 -o md 2>&1 | tee -a "$logs/llama.log"
done
echo "=== summary"
python3 scripts/gpu/summary.py "$logs/iron.log" "$logs/llama.log" | tee "$logs/summary.md"
grep -E "^(decode|bound|prefill):" "$logs/iron.log" | tee -a "$logs/summary.md"
