#!/usr/bin/env bash
# Installs the built IRON into a temporary prefix, then configures, builds and runs a consumer
# and the spec-row tests (public headers only) that find it with find_package(iron).
set -euo pipefail
build=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
"$work/build/spec_rows_test" --gtest_brief=1
echo "find_package(iron) from an install prefix: ok (consumer and spec_rows_test)"
