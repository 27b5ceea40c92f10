#!/usr/bin/env bash
# `iron embed -f FILE` on a long file: one tsv line per input line (empty lines included), progress
# on stderr, and each line's vector equal to the same text given alone with -p; unasked, the
# vectors are normalised as the model's modules.json says (all-MiniLM-L6-v2: length 1), and
# --no-normalize leaves them as pooled.
#   tests/cli/embed_file.sh IRON MODEL_DIR
set -eu
iron=$1
model=$2
if [ ! -f "$model/model.safetensors" ]; then
  echo "skipped: $model is absent (scripts/fetch-model.sh minilm)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 300); do
  case $((i % 3)) in
    0) echo "Sentence number $i is about the river and the mountain." ;;
    1) echo "" ;;
    2) echo "Short $i" ;;
  esac
done > "$work/in.txt"
"$iron" embed -m "$model" -f "$work/in.txt" --format tsv -t 2 > "$work/out.tsv" 2> "$work/err"
lines=$(wc -l < "$work/out.tsv")
[ "$lines" -eq 300 ] || { echo "FAIL: $lines lines for 300 inputs"; exit 1; }
grep -q "^embed: 300/300 inputs" "$work/err" || { echo "FAIL: no progress on stderr:"; cat "$work/err"; exit 1; }
fields=$(head -n 1 "$work/out.tsv" | awk -F'\t' '{print NF}')
[ "$fields" -eq 384 ] || { echo "FAIL: $fields values in a line"; exit 1; }
# Line 3 (a long sentence batched with others) and line 1 (empty) equal their texts alone.
"$iron" embed -m "$model" -p "Sentence number 3 is about the river and the mountain." -p "" --format tsv > "$work/alone.tsv"
sed -n 3p "$work/out.tsv" > "$work/batched.tsv"
sed -n 1p "$work/out.tsv" >> "$work/batched.tsv"
cmp "$work/alone.tsv" "$work/batched.tsv" || { echo "FAIL: batched lines differ from the texts alone"; exit 1; }
length() { awk -F'\t' '{s = 0; for (i = 1; i <= NF; ++i) s += $i * $i; printf "%.4f\n", sqrt(s)}'; }
[ "$(sed -n 3p "$work/out.tsv" | length)" = "1.0000" ] || { echo "FAIL: a default vector's length is not 1"; exit 1; }
pooled=$("$iron" embed -m "$model" -p "Sentence number 3 is about the river and the mountain." --format tsv --no-normalize | length)
[ "$pooled" != "1.0000" ] || { echo "FAIL: --no-normalize gave a unit vector"; exit 1; }
echo "ok: 300 lines, progress shown, batched equals alone, normalised as the model says (pooled length $pooled)"
