#!/usr/bin/env bash
# Prepares here what one run on a lent GPU machine needs (issue 10's speed check), since that
# machine has no network and takes at most 64 MiB of carried files:
#   out/gpu/   iron and iron_tests built with the Vulkan device, llama.cpp's Vulkan llama-bench
#              (built from the llama.cpp source PyPI's llama-cpp-python sdist carries), the
#              shared libraries they need beyond the C and C++ runtimes, stories260K, and the
#              heads of SmolLM2's, Gemma 3 270M's and Qwen2.5-0.5B's GGUFs (metadata and
#              tokenizer; run.sh writes random weights after them: the models do not fit, and
#              speed does not depend on the values),
#              and the Vulkan loader (libvulkan.so.1: a bare machine may have only the driver)
# Then, with the device tool, in one call of at most 6 minutes:
#   run(command="bash scripts/gpu/run.sh", carry=["out/gpu"], timeout_s=420)
# run.sh also runs here, on lavapipe (its figures are then a CPU's, and it says so).
# LLAMA_CPP_PYTHON picks the sdist: 0.3.9's llama.cpp builds with Debian 12's Vulkan headers
# (1.3.239); newer ones (0.3.36) use VK_EXT_layer_settings, which those headers lack. Its build
# compiles hundreds of shaders (20 minutes on 2 busy cores); LLAMA_BENCH=PATH takes a llama-bench
# built before instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
version=${LLAMA_CPP_PYTHON:-0.3.9}
jobs=${IRON_BUILD_JOBS:-$(nproc)}
out=out/gpu
build=build-gpu

scripts/install-deps.sh
scripts/fetch-model.sh
# llama.cpp's Vulkan build also needs the SPIR-V headers.
dpkg-query -W -f='${Status}' spirv-headers 2>/dev/null | grep -q "install ok installed" ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spirv-headers; }

echo "=== iron (Release, Vulkan)"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_VULKAN=ON -DIRON_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build $build -j "$jobs" --target iron_cli iron_tests

if [ -z "${LLAMA_BENCH:-}" ]; then
  echo "=== llama.cpp $version (llama-cpp-python's sdist), Vulkan"
  src=$build/llama-cpp-python-$version
  if [ ! -d "$src" ]; then
    mkdir -p $build/sdist
    python3 -m pip download --quiet --no-binary :all: --no-deps -d $build/sdist "llama-cpp-python==$version"
    tar xzf $build/sdist/llama_cpp_python-$version.tar.gz -C $build
    mv $build/llama_cpp_python-$version "$src"
  fi
  # Portable code (the lent machine's CPU is another), static libraries (one file to carry).
  cmake -S "$src/vendor/llama.cpp" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$src/build" -j "$jobs" --target llama-bench
  LLAMA_BENCH=$(find "$src/build" -name llama-bench -type f -perm -u+x | head -1)
fi

echo "=== $out"
rm -rf $out && mkdir -p $out/lib $out/shared/models
cp "$LLAMA_BENCH" $out/llama-bench
iron_bin=$(find $build -maxdepth 1 -name iron -type f)
cp "$iron_bin" $out/iron
cp $build/tests/iron_tests $out/iron_tests
strip $out/iron $out/iron_tests $out/llama-bench
# Libraries beyond the C and C++ runtimes, which a bare machine may lack (libedit and its own).
for bin in $out/iron $out/iron_tests $out/llama-bench; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  xargs -r -I{} cp -L {} $out/lib/
# The loader: iron opens it at run time (so ldd does not list it), llama-bench links it.
cp -L "$(ldconfig -p | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')" $out/lib/libvulkan.so.1
cp ../shared/models/stories260K.gguf $out/shared/models/
# The heads of the models' files: everything before their tensor data (run.sh writes random
# weights after each). SmolLM2 always; Gemma 3 270M and Qwen2.5-Coder-0.5B (Q4_K_M) where fetched.
for pair in smollm2:models/SmolLM2-135M-Instruct.Q4_1.gguf gemma3:models/gemma-3-270m-q4_k_m.gguf \
            qwen0.5b:models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
  name=${pair%%:*} file=${pair#*:}
  [ -f "$file" ] || { echo "($file not fetched: scripts/fetch-model.sh ${name/smollm2/}; its head is left out)"; continue; }
  python3 - "$file" $out/$name.header <<'PY'
import sys
sys.path.insert(0, "scripts/gpu")
from random_weights import data_start
src, dst = sys.argv[1], sys.argv[2]
head = open(src, "rb").read(32 << 20)
open(dst, "wb").write(head[:data_start(head)])
PY
done
# The tests read their goldens from the source tree they were built in; run.sh links it there.
echo "$root" > $out/source_dir

total=$(du -cm $out | tail -1 | cut -f1)
du -sh $out/* | sort -h
echo "carried: $total MiB of the 64 the device takes (with the repository's own files)"
[ "$total" -le 56 ] || { echo "error: out/gpu takes $total MiB: too much to carry" >&2; exit 1; }
