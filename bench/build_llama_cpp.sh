#!/usr/bin/env bash
# Builds the peer the speed figures are measured against: llama.cpp's own llama-bench and
# llama-server, from the llama.cpp that PyPI's llama-cpp-python sdist vendors (so no other
# network than the package registry), for one instruction set:
#   bench/build_llama_cpp.sh native [DIR]   every extension this machine has (-DGGML_NATIVE=ON)
#   bench/build_llama_cpp.sh avx2 [DIR]     AVX2, FMA, F16C and nothing wider: what an AVX2-only
#                                           x86 runs, to set beside IRON_CPU=avx2 on a wider one
#   bench/build_llama_cpp.sh avxvnni [DIR]  the same with AVX-VNNI (an Alder Lake, a Zen 5 without
#                                           AVX-512), beside IRON_CPU=avxvnni
# DIR defaults to build-llama-cpp-ISA/ (git-ignored as a build directory). The binaries land in
# DIR/bin/; the flags used are written to DIR/flags.txt, for a figure's note to quote.
# Not part of the tests. On 2 cores the build takes several minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
isa=${1:?"usage: bench/build_llama_cpp.sh native|avx2|avxvnni [DIR]"}
out=${2:-build-llama-cpp-$isa}
version=${IRON_LLAMA_CPP_PYTHON:-0.3.36}
case $isa in
  native) flags=(-DGGML_NATIVE=ON) ;;
  avx2) flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
    -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  avxvnni) flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
    -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=ON
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  *) echo "build_llama_cpp.sh: ISA is native, avx2 or avxvnni, not '$isa'" >&2; exit 2 ;;
esac
mkdir -p "$out"
src="$out/llama_cpp_python-$version"
if [ ! -d "$src/vendor/llama.cpp" ]; then
  echo "fetching llama-cpp-python $version's sdist (it vendors llama.cpp)"
  python3 -m pip download "llama-cpp-python==$version" --no-deps --no-binary :all: -d "$out" >/dev/null
  tar xzf "$out/llama_cpp_python-$version.tar.gz" -C "$out"
fi
cmake -S "$src/vendor/llama.cpp" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF "${flags[@]}" >/dev/null
cmake --build "$out/build" -j "${IRON_BUILD_JOBS:-$(nproc)}" --target llama-bench llama-server
mkdir -p "$out/bin"
cp "$out/build/bin/llama-bench" "$out/build/bin/llama-server" "$out/bin/"
echo "llama.cpp from llama-cpp-python $version, cmake ${flags[*]}" >"$out/flags.txt"
echo "built $out/bin/llama-bench and $out/bin/llama-server ($(cat "$out/flags.txt"))"
