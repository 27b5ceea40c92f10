#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, into build-fuzz/) and runs each one for
# SECONDS (default 30), one at a time, over its seed corpus (fuzz/corpus/<target>/, plus
# stories260K.gguf from ../shared/models for the GGUF targets when present). New inputs the
# fuzzer finds accumulate in build-fuzz/corpus/<target>/; a crash is saved under
# build-fuzz/artifacts/<target>/ and makes the script fail (after the other targets have run).
# The fuzz build leaves the Vulkan device out (-DIRON_VULKAN=OFF): nothing it fuzzes reaches it,
# and so a build without Vulkan keeps being compiled and exercised.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
all_targets=(gguf_reader safetensors_reader hf_config gguf_config tokenizer_json gguf_tokenizer
  tokenizer_encode profile_json chat_template command_line conversation_json serve_request)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

cxx=""
for c in clang++ clang++-14; do
  if command -v "$c" >/dev/null; then cxx=$c; break; fi
done
if [ -z "$cxx" ]; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
cc=${cxx/clang++/clang}

jobs=${IRON_BUILD_JOBS:-2}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DIRON_FUZZ=ON -DIRON_SANITIZE=address,undefined \
  -DIRON_BUILD_TESTS=OFF -DIRON_BUILD_BENCH=OFF -DIRON_VULKAN=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" --target iron_fuzz  # and the binary seeds (fuzz/CMakeLists.txt)

shared=${IRON_SHARED_DIR:-../shared}
stories="$shared/models/stories260K.gguf"
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
if [ -f "$stories" ]; then
  mkdir -p "$extra/gguf"
  cp "$stories" "$extra/gguf/"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for target in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$target
  artifacts=build-fuzz/artifacts/$target/
  mkdir -p "$corpus" "$artifacts"
  seeds=(fuzz/corpus/"$target")
  dict=()
  case $target in
    gguf_*) dict=(-dict=fuzz/dict/gguf.dict); [ -d "$extra/gguf" ] && seeds+=("$extra/gguf") ;;
    safetensors_reader | hf_config | tokenizer_json | profile_json | conversation_json | serve_request) dict=(-dict=fuzz/dict/json.dict) ;;
    tokenizer_encode | chat_template) dict=(-dict=fuzz/dict/text.dict) ;;
    command_line) dict=(-dict=fuzz/dict/command_line.dict) ;;
  esac
  echo "=== fuzz_$target for ${seconds}s"
  if ! build-fuzz/fuzz/fuzz_"$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}" \
    "$corpus" "${seeds[@]}" 2>build-fuzz/fuzz_"$target".log; then
    failed+=("$target")
    tail -n 60 build-fuzz/fuzz_"$target".log
  fi
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|^Done" build-fuzz/fuzz_"$target".log || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs under build-fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, no findings"
