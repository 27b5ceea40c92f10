#!/usr/bin/env bash
# Builds IRON and runs every test: the README's second command, and what CI runs.
# Installs missing Debian packages, fetches SmolLM2 once into models/ (tests of the real model
# read it there), builds with warnings as errors, then runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/fetch-model.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
ctest --test-dir build --output-on-failure -j "$(nproc)"
