#!/usr/bin/env bash
# Runs on the lent GPU machine what scripts/gpu/prepare.sh made here (out/gpu/): the Vulkan
# tests, then, for each model head prepared (SmolLM2-135M Q4_1, Gemma 3 270M and Qwen2.5-0.5B
# Q4_K_M), IRON's and llama.cpp's Vulkan benchmarks on a file of that model's shapes and formats
# with random weights, in turns, and the table of both with their ratio. About 5 minutes on a
# GPU; files for the session land in $OUT (tests.log, NAME.iron.log, NAME.llama.log, summary.md).
#   run(command="bash scripts/gpu/run.sh", carry=["out/gpu"], timeout_s=540)
# Here, on lavapipe, it runs too (then its figures are a CPU's; iron bench's device line says so):
# IRON_GPU_PROMPT and IRON_GPU_GEN (512 and 128) make it shorter there, and IRON_GPU_MODELS
# (the heads' names, e.g. "smollm2") picks the models; IRON_GPU_TESTS=0 leaves the tests out.
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
started=$SECONDS
stamp() { echo "=== $* ($((SECONDS - started)) s in)"; }

stamp "devices"
$out/iron info --devices 2>&1 | tee "$logs/devices.log"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$logs/devices.log"
stamp "Vulkan tests"
[ "${IRON_GPU_TESTS:-1}" = 0 ] || timeout 180 $out/iron_tests --gtest_brief=1 \
  --gtest_filter='*Vulkan*:OpKernels.*:Attention.*EveryDevice*:SpecRows.*:CarriedLoop*:-VulkanSmolLM2.*' 2>&1 |
  tee "$logs/tests.log" | tail -25
stamp "stories260K, greedy, CPU and Vulkan"
for device in cpu vulkan; do
  timeout 30 $out/iron generate -m $out/shared/models/stories260K.gguf -p "Once upon a time" -n 48 --temp 0 \
    --device $device 2>/dev/null > "$logs/stories.$device.txt"
  echo "$device: $(head -c 300 "$logs/stories.$device.txt")"
done
cmp -s "$logs/stories.cpu.txt" "$logs/stories.vulkan.txt" && echo "the same text" || echo "THE TEXTS DIFFER"

prompt=${IRON_GPU_PROMPT:-512} gen=${IRON_GPU_GEN:-128}
: > "$logs/summary.md"
for header in $out/*.header; do
  name=$(basename "$header" .header)
  case " ${IRON_GPU_MODELS:-$name} " in *" $name "*) ;; *) continue ;; esac
  stamp "$name: its shapes and formats, random weights"
  model=/tmp/$name-random.gguf
  python3 scripts/gpu/random_weights.py "$header" "$model" || continue
  : > "$logs/$name.iron.log"
  : > "$logs/$name.llama.log"
  for turn in 1 2; do
    stamp "$name: turn $turn"
    timeout 90 $out/iron bench --device vulkan -m "$model" -p "$prompt" -n "$gen" -r 3 2>&1 | tee -a "$logs/$name.iron.log"
    timeout 90 $out/llama-bench -m "$model" -p "$prompt" -n "$gen" -r 3 -ngl 99 -o md 2>&1 | tee -a "$logs/$name.llama.log"
  done
  rm -f "$model"
  { echo "### $name, pp$prompt and tg$gen"; echo
    python3 scripts/gpu/summary.py "$logs/$name.iron.log" "$logs/$name.llama.log"; echo
    grep -E "^(decode|bound|prefill|device):" "$logs/$name.iron.log" | sort -u; echo; } >> "$logs/summary.md"
done
stamp "summary"
cat "$logs/summary.md"
