#!/usr/bin/env bash
# Requantises a GGUF file with llama.cpp's own llama-quantize, so that the K-quant kernels are
# measured on more than one model (issue 12: SmolLM2 as Q4_K_M and Q6_K beside Gemma 3):
#   bench/requantize.sh models/SmolLM2-135M-Instruct.Q4_1.gguf Q4_K_M   # -> models/SmolLM2-135M-Instruct.Q4_K_M.gguf
#   python3 bench/compare_llama_cpp.py -m models/SmolLM2-135M-Instruct.Q4_K_M.gguf -t 2 -p 512 -n 128 -r 3 --precision medium
# llama-quantize is built once (CPU only) from the llama.cpp source PyPI's llama-cpp-python sdist
# carries, in build-llama-quantize/ (git-ignored, never committed); the source file is already
# quantised, so --allow-requantize: the new file's weights went through two roundings, which
# does not change what its kernels cost. Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: bench/requantize.sh MODEL.gguf TYPE (Q4_K_M, Q5_K_M, Q6_K, ...)" >&2; exit 2; }
source_file=$1 type=$2
out=${source_file%.*.gguf}.$type.gguf
[ "$out" != "$source_file" ] || out=${source_file%.gguf}.$type.gguf
version=${LLAMA_CPP_PYTHON:-0.3.9}
build=build-llama-quantize
# LLAMA_QUANTIZE=PATH: a llama-quantize built before.
quantize=${LLAMA_QUANTIZE:-$(find $build -name llama-quantize -type f -perm -u+x 2>/dev/null | head -1)}
if [ -z "$quantize" ]; then
  echo "building llama-quantize from llama-cpp-python $version's sdist (once, minutes) ..." >&2
  mkdir -p $build/sdist
  python3 -m pip download --quiet --no-binary :all: --no-deps -d $build/sdist "llama-cpp-python==$version"
  tar xzf $build/sdist/llama_cpp_python-$version.tar.gz -C $build
  src=$build/llama_cpp_python-$version/vendor/llama.cpp
  cmake -S $src -B $src/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build $src/build -j "$(nproc)" --target llama-quantize >/dev/null
  quantize=$(find $build -name llama-quantize -type f -perm -u+x | head -1)
fi
"$quantize" --allow-requantize "$source_file" "$out" "$type" >"$out.log" 2>&1 ||
  { tail -5 "$out.log" >&2; echo "error: llama-quantize failed (log: $out.log)" >&2; exit 1; }
rm -f "$out.log"
echo "wrote $out"
