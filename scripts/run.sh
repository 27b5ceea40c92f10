#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches SmolLM2-135M-Instruct once, and has it
# answer a chat prompt. Arguments after the script go to `iron generate` (see `build/iron generate --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/fetch-model.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
if [ $# -eq 0 ]; then
  set -- --chat -p "What is the capital of France? Answer in one sentence." -n 64
fi
exec build/iron generate -m models/SmolLM2-135M-Instruct.Q4_1.gguf "$@"
