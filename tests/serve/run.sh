#!/usr/bin/env bash
# ctest's entry to tests/serve/serve_test.py: the Python environment (scripts/python-env.sh, with
# PyPI's openai and requests), stories260K from ../shared/ (skipped, naming it, when absent; see
# tests/needs_shared.sh) and, when fetched, SmolLM2 and Gemma 3 from models/ for the chat cases
# and all-MiniLM-L6-v2 for the embeddings, EmbeddingGemma for prompts.
#   tests/serve/run.sh IRON
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
iron=$1
stories=$root/../shared/models/stories260K.gguf
smollm=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
gemma=$root/models/gemma-3-270m-q4_k_m.gguf
minilm=$root/models/all-MiniLM-L6-v2
embeddinggemma=$root/models/embeddinggemma-300m
py=$("$root/scripts/python-env.sh" openai requests)
command -v curl >/dev/null || { echo "curl is not installed (scripts/install-deps.sh)" >&2; exit 1; }
chat=()
if [ -f "$smollm" ]; then
  chat=(--chat-model "$smollm")
else
  echo "chat cases skipped: $smollm is absent (scripts/fetch-model.sh)"
fi
if [ -f "$gemma" ]; then
  chat+=(--gemma-model "$gemma")
else
  echo "Gemma 3 case skipped: $gemma is absent (scripts/fetch-model.sh gemma3)"
fi
if [ -f "$minilm/config.json" ]; then
  chat+=(--embed-model "$minilm")
else
  echo "embedding cases skipped: $minilm is absent (scripts/fetch-model.sh minilm)"
fi
if [ -f "$embeddinggemma/model.safetensors" ]; then
  chat+=(--prompted-embed-model "$embeddinggemma")
else
  echo "prompt cases skipped: $embeddinggemma is absent (scripts/fetch-model.sh embeddinggemma)"
fi
exec "$root/tests/needs_shared.sh" "$stories" "$py" "$root/tests/serve/serve_test.py" "$iron" "$stories" "${chat[@]}"
