#!/usr/bin/env bash
# ctest's entry to tests/ray/ray_test.py: IRON on a local Ray cluster of two nodes. Skipped (exit
# 77), saying why, when the build's Python has no Ray (scripts/test.sh installs it:
# scripts/python-env.sh "ray[serve,data]" pyarrow openai requests) or stories260K (../shared/) or
# all-MiniLM-L6-v2 (models/, scripts/fetch-model.sh minilm) is absent.
#   tests/ray/run.sh PYTHON IRON PACKAGE_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=$1 iron=$2 package=$3
minilm=$root/models/all-MiniLM-L6-v2
if ! "$py" -c "import ray.serve, ray.data, pyarrow, requests, openai" 2>/dev/null; then
  echo "skipped: $py has no Ray (pip install 'ray[serve,data]' pyarrow openai requests, or scripts/test.sh)"
  exit 77
fi
if [ ! -f "$minilm/config.json" ]; then
  echo "skipped: $minilm is absent (scripts/fetch-model.sh minilm)"
  exit 77
fi
export PYTHONPATH=$package${PYTHONPATH:+:$PYTHONPATH}
# Ray's own files (its session, its logs) in a directory of this run's, removed after.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RAY_TMPDIR=$tmp
# Ray Serve gives its HTTP proxy 5 s to report ready, three times: on 2 cores shared with a
# build or with ctest's other tests it missed that and the app never started (measured here
# 2026-12-03, load average near 5). A loaded CI machine is not a broken proxy.
export RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S=${RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S:-60}
export RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S=${RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S:-60}
"$root/tests/needs_shared.sh" "$root/../shared/models/stories260K.gguf" \
  "$py" "$root/tests/ray/ray_test.py" "$iron" "$root/../shared/models/stories260K.gguf" "$minilm"
