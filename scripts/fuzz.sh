#!/usr/bin/env bash
# The clang sanitizer build, build-asan/ (AddressSanitizer + UndefinedBehaviorSanitizer, every
# report fatal, libFuzzer's coverage in everything), and the libFuzzer targets run from it. One
# build serves both the test program (scripts/test.sh runs its ctest) and the fuzzers, so CI
# compiles the library under the sanitizers once.
#   scripts/fuzz.sh --build            configure and build everything in build-asan/ (tests too)
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# The second form builds the fuzz targets if needed and runs each one for SECONDS (default 30)
# over its seed corpus (fuzz/corpus/<target>/, plus stories260K.gguf from ../shared/models for
# the GGUF targets when present), as many at once as there are CPUs (each fuzzer is one thread).
# New inputs the fuzzer finds accumulate in build-asan/corpus/<target>/; a crash is saved under
# build-asan/artifacts/<target>/ and makes the script fail (after the other targets have run).
# Vulkan is built here as in the Release build (its tests run under the sanitizers); the ARM64
# stage (scripts/test-arm64.sh) is the build without Vulkan.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan
build_all=0
if [ "${1:-}" = --build ]; then build_all=1; shift; fi
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

jobs=${IRON_BUILD_JOBS:-$(nproc)}
# -O1 with line tables only (-g1): enough for every report's stack to name its lines, and about
# half the compiler's time of -O2 -g.
flags="-O1 -g1 -DNDEBUG"
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DIRON_FUZZ=ON -DIRON_SANITIZE=address,undefined \
  -DIRON_BUILD_TESTS=ON -DIRON_BUILD_BENCH=OFF -DIRON_HOST_KERNELS=ON >/dev/null
if [ $build_all = 1 ]; then
  cmake --build "$build" -j "$jobs"
  exit 0
fi
cmake --build "$build" -j "$jobs" --target iron_fuzz  # and the binary seeds (fuzz/CMakeLists.txt)

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
# One target's run, into its log; its status file says whether it found anything.
fuzz_one() {
  local target=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1/ log=$build/fuzz_$1.log
  mkdir -p "$corpus" "$artifacts"
  local seeds=(fuzz/corpus/"$target") dict=()
  case $target in
    gguf_*) dict=(-dict=fuzz/dict/gguf.dict); [ -d "$extra/gguf" ] && seeds+=("$extra/gguf") ;;
    safetensors_reader | hf_config | tokenizer_json | profile_json | conversation_json | serve_request) dict=(-dict=fuzz/dict/json.dict) ;;
    tokenizer_encode | chat_template) dict=(-dict=fuzz/dict/text.dict) ;;
    command_line) dict=(-dict=fuzz/dict/command_line.dict) ;;
  esac
  if "$build"/fuzz/fuzz_"$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}" \
    "$corpus" "${seeds[@]}" 2>"$log"; then
    echo ok >"$log.status"
  else
    echo failed >"$log.status"
  fi
}
# Report a finished target: its figures, or its log's end when it found something.
report() {
  local target=$1 log=$build/fuzz_$1.log
  echo "=== fuzz_$target for ${seconds}s: $(cat "$log.status")"
  if [ "$(cat "$log.status")" != ok ]; then
    failed+=("$target")
    tail -n 60 "$log"
  fi
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|^Done" "$log" || true
}
failed=()
running=()
for target in "${targets[@]}"; do
  if [ ${#running[@]} -ge "$jobs" ]; then
    wait "${running[0]%%:*}" || true
    report "${running[0]#*:}"
    running=("${running[@]:1}")
  fi
  fuzz_one "$target" &
  running+=("$!:$target")
done
for entry in "${running[@]}"; do
  wait "${entry%%:*}" || true
  report "${entry#*:}"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs under $build/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, $jobs at a time, no findings"
