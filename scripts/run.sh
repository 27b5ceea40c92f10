#!/usr/bin/env bash
# The main job: installs what is missing, builds the `iron` command (only it: the tests,
# benchmarks, fuzz targets and examples are scripts/test.sh's), fetches SmolLM2-135M-Instruct
# once, and has it answer a chat prompt. Arguments after the script go to `iron generate` (see
# `build/iron generate --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
say() { echo "run.sh: $1 ($((SECONDS - start)) s so far)"; }
say "checking the Debian packages IRON builds with"
scripts/install-deps.sh
say "fetching SmolLM2-135M-Instruct (once, into models/)"
scripts/fetch-model.sh
say "configuring and building the iron command into build/ (a few minutes on 2 cores the first time)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target iron_cli
if [ $# -eq 0 ]; then
  set -- --chat -p "What is the capital of France? Answer in one sentence." -n 64
fi
say "running: build/iron generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf $*"
exec build/iron generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf "$@"
