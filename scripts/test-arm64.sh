#!/usr/bin/env bash
# Builds IRON for 64-bit ARM (aarch64) with Debian's cross compiler and runs its operator, kernel
# and graph tests, and stories260K's greedy ids through `iron generate`, under user-mode QEMU on
# two processors: NEON alone (-cpu max,sve=off) and SVE with 256-bit vectors (-cpu
# max,sve256=on), so nothing assumes x86 or 128-bit vectors. An aarch64 build runs the portable
# kernels (the x86 ones are built for x86-64 alone); `iron info --devices` must say so.
#   scripts/test-arm64.sh        (build-arm64/, -O1, warnings as errors)
# Installs what is missing first: the cross compiler, qemu-user, and the arm64 packages of the
# libraries IRON links (multiarch: dpkg --add-architecture arm64). Vulkan, the Python extension,
# the benchmarks and the fuzzers stay off; the test program and the command line are built.
# The two processors' runs go side by side (each is one thread most of the time), each
# into its own log, printed when it ends. Whole-model tests do not run here (the native build
# runs them); stories260K's ids are skipped, saying so, without ../shared/models/stories260K.gguf.
# Each stage prints its time. From nothing built, on this machine's 2 cores while another build
# ran on them (load 4; 2026-12-03, IRON_BUILD_JOBS=1 under nice), the script took 13.2 min: the
# packages were there (0 s), configure and build 12.6 min (154 compiles), the tests under QEMU
# 41 s (both processors side by side, each 40 s: 192 tests, 23 of them skipped, and
# stories260K's ids in 1 s). Alone, one processor's tests take about 19 s. At -O1 (2026-12-03,
# the machine otherwise quiet, IRON_BUILD_JOBS=2): 3.5 min from nothing, the build 186 s (165
# units) and both processors' tests 21 s.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${IRON_BUILD_JOBS:-$(nproc)}
build=build-arm64
start=$SECONDS
last=$SECONDS
stage() {
  echo "=== $1 (last stage $((SECONDS - last)) s, $((SECONDS - start)) s so far)"
  last=$SECONDS
}

stage "packages"
packages=(cmake ninja-build pkg-config g++-aarch64-linux-gnu qemu-user nlohmann-json3-dev libcli11-dev libhwy-dev
  libgtest-dev:arm64 libedit-dev:arm64 libcpp-httplib-dev:arm64)
scripts/install-deps.sh "${packages[@]}"

# The suites run under QEMU, and only the test files defining them are built: the operator,
# kernel, graph and thread pool suites, the data types and the quantised blocks' decoding (every
# kind, against gguf's golden values), and the tokenizers (char is unsigned on aarch64, and they
# read bytes of UTF-8).
filter='OpKernels.*:OpReference.*:Attention.*:GemmFast.*:GemmInt8.*:Gelu.*:SegmentMean.*:CopyScatter.*'
filter+=':GemmRows.*:SampleRows.*:SlotAttention.*:SlotRows.*:*CarriedLoop*:Functional.*:Graph.*:Fold.*'
filter+=':KernelTable.*:Merge.*:CheckMode.*:Smoke.*:Errors.*:Profile.*:ThreadPool.*:StreamingRead.*:DType.*:Tensor.*:QuantGolden.*'
filter+=':*GgufEveryType*:GgufFormat.*:ByteLevelTokenizer.*:SentencePieceTokenizer.*:Unicode.*'
suites=$(tr ':' '\n' <<<"$filter" | sed -e 's/\.\*$//' -e 's/\*/[A-Za-z0-9_]*/g' | paste -sd'|')
test_files=$(scripts/test-files.sh "$suites")
stage "configure and build ($build/)"
# Tests are listed when ctest runs, not after each link (which would start QEMU in the build).
# (A configured build-arm64/ keeps its toolchain: CMake would warn that the file is unused.)
# At -O1 (warnings still errors): the compiler's time is most of this stage, and the tests under
# QEMU are a minute either way.
cmake --no-warn-unused-cli -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" \
  -DIRON_VULKAN=OFF -DIRON_PYTHON=OFF -DIRON_BUILD_BENCH=OFF -DIRON_FUZZ=OFF \
  -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST -DIRON_TEST_FILES="$test_files"
cmake --build "$build" -j "$jobs" --target iron_cli iron_tests

stage "tests under QEMU"
stories=../shared/models/stories260K.gguf
# The ids the native tests expect (tests/models/published.hpp: llama2.c's, and llama.cpp's).
expected=$(sed -n '/kStoriesGreedy = {/,/};/p' tests/models/published.hpp | sed 's/.*{//' | tr -cs '0-9' ' ' | xargs)
[ "$(wc -w <<<"$expected")" = 60 ] || { echo "could not read 60 ids from tests/models/published.hpp" >&2; exit 1; }
# On the arm64 C library the packages above bring, with its own loader: no -L (the toolchain
# file says why).
qemu=(qemu-aarch64)
# One processor's checks, into its log: what `iron info` reports (it must name the kernels it
# runs, and the vector extensions QEMU gives), the tests, then the greedy ids.
run_on() {
  local name=$1 cpu=$2 features=$3 skip=${4:-} t
  # The two processors run at once: each gets its own temporary folder, so no test's scratch
  # file is written by the other between its write and its read.
  local tmp="$build/tmp-$name"
  rm -rf "$tmp" && mkdir -p "$tmp"
  {
    echo "--- $name: qemu-aarch64 -cpu $cpu"
    t=$SECONDS
    "${qemu[@]}" -cpu "$cpu" "$build/iron" info --devices | tee "$build/$name.info"
    grep -qF "features: $features" "$build/$name.info" || { echo "expected features: $features" >&2; return 1; }
    TMPDIR="$tmp" IRON_TEST_EMULATED=1 "${qemu[@]}" -cpu "$cpu" "$build/tests/iron_tests" --gtest_filter="$filter${skip:+:-$skip}" --gtest_brief=1
    echo "--- $name: tests took $((SECONDS - t)) s"
    if [ -f "$stories" ]; then
      t=$SECONDS
      local ids
      ids=$("${qemu[@]}" -cpu "$cpu" "$build/iron" generate -m "$stories" -p "" -n 60 --temp 0 --ids 2>"$build/$name.err")
      if [ "$ids" != "$expected" ]; then
        cat "$build/$name.err"
        printf 'stories260K greedy ids differ:\n  got      %s\n  expected %s\n' "$ids" "$expected" >&2
        return 1
      fi
      echo "--- $name: stories260K's 60 greedy ids are the published ones ($((SECONDS - t)) s)"
    else
      echo "--- $name: stories260K skipped: $stories is absent (../shared/ is not beside the repository)"
    fi
  } >"$build/$name.log" 2>&1
}
run_on neon max,sve=off 'neon dotprod' &
neon=$!
# Attention has no SVE copy (tile_hwy.cpp), nor the matmuls (gemm_hwy.cpp's loops keep arrays
# of vectors) and their int8 path (int8_dotprod.cpp): on the SVE processor they would run NEON's
# loops again, the NEON processor's run over (Attention took 45 s of this one's 147 under QEMU,
# 2026-12-06; GemmInt8 about 40). Fold, Merge and OpKernels still run matmuls here, beside the
# SVE copies of the operators merged into them.
run_on sve256 max,sve256=on 'neon dotprod sve (256-bit)' 'Attention.*:GemmInt8.*:GemmFast.*:GemmRows.*' &
sve=$!
status=0
wait $neon || status=1
cat "$build/neon.log"
wait $sve || status=1
cat "$build/sve256.log"
[ $status = 0 ] || { echo "FAILED (logs: $build/neon.log, $build/sve256.log)" >&2; exit 1; }
stage "done"
