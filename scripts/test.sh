#!/usr/bin/env bash
# Builds IRON and runs every test: the README's second command, and what CI runs.
# Installs missing Debian packages, fetches SmolLM2 once into models/ (tests of the real model
# read it there), builds with warnings as errors, then runs ctest. Then the sanitizer stages:
#   build-asan/  every test under AddressSanitizer + UndefinedBehaviorSanitizer (any report fails),
#                built by clang with libFuzzer's coverage (scripts/fuzz.sh --build)
#   build-tsan/  the thread pool, carried loop, graph, multi-threaded model and scheduler tests under
#                ThreadSanitizer
#   build-arm64/ the aarch64 cross build, its tests under QEMU (scripts/test-arm64.sh)
#   then each libFuzzer target for 30 s from build-asan/ (scripts/fuzz.sh), two at a time
# The Release build includes the Python package, whose pytest suite is one of its ctest tests.
# IRON_QUICK=1 stops after that ctest; IRON_FETCH_LARGE=1 also fetches EmbeddingGemma (1.15 GB)
# for its whole-model tests. Each stage prints the time so far; CI allows 45 min for all of it.
# From a fresh clone of 5f60192 on a 2-vCPU AVX2-only AMD EPYC (Zen 3), otherwise idle
# (2026-12-07), in minutes: models and packages 1.4, Release build 7.5, its ctest 5.1 (517
# tests), IRON_CPU=portable 1.9, the clang ASan build 8.5, its tests 2.9, TSan build 2.9 and
# tests 1.3, ARM64 6.1 (build 3.3), the fuzzers 3.1: 40.6 in all (2435 s; 43.7 the session
# before, 50.5 two before, 64.6 + 3.1 three before). What cut them (each commit's message has its
# figures): the library's standard headers precompiled, kernels this machine cannot run compiled at -O0 in the
# sanitizer builds (IRON_HOST_KERNELS), Highway's never-picked baseline copy compiled out, the
# test files compiled six to a unit, the subset builds (TSan, ARM64) compiling only their test
# files and what those link, the lavapipe matmul's lanes over columns, ray_cluster sharing the
# machine, and lavapipe's whole-model checks on less text (its matmul shader is 96% of its time).
# On a Xeon with AVX-512 the suite took 40 min before these cuts.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${IRON_BUILD_JOBS:-$(nproc)}
# Tests that read ../shared/ (stories260K) skip, naming the file, in a clone without it; where it
# is there, a missing file fails them instead.
if [ -d ../shared ]; then export IRON_REQUIRE_SHARED=1; fi
start=$SECONDS
stage() { echo "=== $1 ($((SECONDS - start)) s so far)"; }
# ctest starts the tests it knows to be longest first (from its cost file, which each run
# updates); a fresh build directory gets tests/ctest_costs.txt, the longest tests' seconds on an
# AVX2-only Zen 3, so that they do not start last and leave one core idle at the end (the
# Release ctest there: 698 s with the 332 s Vulkan model test started at test 305 of 515; 541 s
# with it first; 378 s once ray_cluster, which idles a core a third of its time, started among
# the first beside the others rather than alone at the end).
seed_costs() {
  local file=$1/Testing/Temporary/CTestCostData.txt
  [ -f "$file" ] || { mkdir -p "$(dirname "$file")" && cp tests/ctest_costs.txt "$file"; }
}

scripts/install-deps.sh
scripts/fetch-model.sh          # SmolLM2-135M-Instruct (Q4_1)
scripts/fetch-model.sh gemma3   # Gemma 3 270M (Q4_K_M): its logits and tokenizer tests
scripts/fetch-model.sh minilm   # all-MiniLM-L6-v2: the encoder's tokenizer and embedding tests
scripts/fetch-model.sh qwen0.5b # Qwen2.5-Coder-0.5B (Q4_K_M): its logits, tokenizer and chat tests
# EmbeddingGemma-300M (1.15 GB, f32): its tokenizer and sentence-transformers tests, only when
# asked; without it they skip, naming it, and the tiny encoder from the same code runs everywhere.
if [ "${IRON_FETCH_LARGE:-0}" = 1 ]; then scripts/fetch-model.sh embeddinggemma; fi
# The Release build includes the Python extension (python/src/, one library build for both), and
# its ctest runs the pytest suite as the test python_pytest (any pytest status but 0 fails it).
# Ray (ray[serve,data], pyarrow) and the HTTP clients for the ctest test ray_cluster
# (tests/ray/): iron.ray on a local two-node Ray cluster; without them it skips, saying so.
# ml_dtypes: bf16 outputs as ml_dtypes.bfloat16 arrays (float32 without it; both are tested).
py=$(scripts/python-env.sh nanobind numpy pytest "ray[serve,data]" pyarrow openai requests ml_dtypes)
stage "build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_PYTHON=ON -DPython_EXECUTABLE="$py"
cmake --build build -j "$jobs"
stage "test"
seed_costs build
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The whole-model and kernel tests again on the narrower CPU paths this machine can take
# (IRON_CPU limits what the kernels may use), so an AVX2-only machine's path and the portable one
# (every other processor's today, ARM64's among them) are held to the same references on every
# machine CI runs on. Vulkan's tests are left out: IRON_CPU does not change them. About 1 and 2.5
# min on 2 cores (2026-12-03, a Xeon with AMX).
narrow_suites='^(Stories260K|SmolLM2|Gemma3|Gemma3Encoder|MiniLM|SentenceEncoder|BatchDecode|Determinism|GgufSmolLM2|LlamaRunner|OpKernels|GemmFast|GemmInt8|Attention)\.'
if [ "$(uname -m)" = x86_64 ]; then
  narrow=(portable)
  # AVX2 alone where the machine has more (AVX-512, or AVX-VNNI beside AVX2).
  grep -qwE 'avx512f|avx_vnni' /proc/cpuinfo && narrow=(avx2 portable)
  for cpu in "${narrow[@]}"; do
    skip='Vulkan'
    # The portable loops have no int8 or bf16 products, so medium computes there what highest
    # does: the medium twins of the highest reference checks are left out (MiniLM's two gave the
    # same worst cosine to the bit, 2026-12-06; Gemma 3's took 68 s). Medium's cache types still
    # run (SmolLM2.SmallerCaches...); SmolLM2's decode steps at medium do not (82 s of this
    # stage's 137 alone, 2026-12-06): their attention over f16 and q8_0 caches is the decode
    # tile Attention.DecodeSplitsTheKeysAcrossThreads holds to its reference on this path.
    if [ "$cpu" = portable ]; then
      skip+='|Gemma3\.LogitsAtMediumPrecision|MiniLM\.MediumStaysClose|SmolLM2\.LogitsAtMediumPrecision'
      skip+='|SmolLM2\.DecodingAtMediumStaysClose'
    fi
    stage "test: whole models and kernels with IRON_CPU=$cpu"
    IRON_CPU=$cpu ctest --test-dir build --output-on-failure -j "$(nproc)" -R "$narrow_suites" -E "$skip"
  done
fi
if [ "${IRON_QUICK:-0}" = 1 ]; then
  stage "done (IRON_QUICK=1: sanitizer and fuzz stages skipped)"
  exit 0
fi

# The sanitizer builds compile at -O1 with line tables only (-g1): enough for every report's
# stack to name its lines, and about half the compiler's time of -O2 -g (862 against ~1500
# CPU-seconds for the ASan build on this machine, 2026-12-01), the stage CI's budget felt most.
# The ASan + UBSan build is clang's and also holds the fuzzers (scripts/fuzz.sh): the library is
# compiled under the sanitizers once for both, and GCC (Release) and clang (here) both compile
# everything with warnings as errors.
sanitizer_flags="-O1 -g1 -DNDEBUG"
stage "build-asan: clang, address,undefined, with the fuzzers"
IRON_BUILD_JOBS=$jobs scripts/fuzz.sh --build
stage "test under ASan + UBSan"
seed_costs build-asan
ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)"

stage "build-tsan: thread"
# The suites with threads in them (the pool, the carried loop, graphs, multi-threaded kernels and
# models, the serving engine); only the test files defining them are built.
tsan_suites='CarriedLoop|CarriedLoopDepth|CarriedLoopOn|Graph|Smoke|OpKernels|Attention|Stories260K|Determinism|ThreadPool|SpecRows|Engine|EngineStop'
tsan_files=$(scripts/test-files.sh "$tsan_suites")
# Warnings stay errors in the Release build; with -fsanitize=thread GCC 12 reports a false
# -Wstringop-overflow inside std::vector::insert, so here they are only warnings.
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIRON_SANITIZE=thread \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$sanitizer_flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$sanitizer_flags" \
  -DIRON_BUILD_BENCH=OFF -DIRON_WERROR=OFF -DIRON_HOST_KERNELS=ON -DIRON_TEST_FILES="$tsan_files"
cmake --build build-tsan -j "$jobs" --target iron_tests
stage "test under TSan"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -R "(^|/)($tsan_suites)\."

# ARM64: the cross build and its operator, kernel and graph tests and stories260K's ids under
# QEMU, on NEON and on 256-bit SVE (scripts/test-arm64.sh), from an x86-64 machine.
if [ "$(uname -m)" = x86_64 ]; then
  stage "arm64 under QEMU: scripts/test-arm64.sh"
  IRON_BUILD_JOBS=$jobs scripts/test-arm64.sh
fi

stage "fuzz: each target 30 s, $(nproc) at a time"
IRON_BUILD_JOBS=$jobs scripts/fuzz.sh 30
stage "done"
