#!/usr/bin/env bash
# One command-line check: runs COMMAND... (at most 120 s: a hang fails), then requires exit status
# STATUS and REGEX in what it printed. A failing command (STATUS 1) must end stderr with its one
# error line ("iron: error: ..."), and REGEX must match that line.
#   expect.sh STATUS REGEX COMMAND...
# An argument @EMPTY@ is passed as an empty string (CMake drops empty arguments).
# Environment: IRON_TEST_FIFO=PATH makes a FIFO at PATH first (removed after);
# IRON_TEST_STDOUT=FILE sends the command's standard output there.
set -u
status=$1
regex=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"; [ -n "${IRON_TEST_FIFO:-}" ] && rm -f "$IRON_TEST_FIFO"' EXIT
if [ -n "${IRON_TEST_FIFO:-}" ]; then
  rm -f "$IRON_TEST_FIFO"
  mkfifo "$IRON_TEST_FIFO"
fi
args=()
for a in "$@"; do [ "$a" = "@EMPTY@" ] && args+=("") || args+=("$a"); done
timeout 120 "${args[@]}" >"${IRON_TEST_STDOUT:-$work/out}" 2>"$work/err"
got=$?
echo "exit status: $got"
echo "--- stderr:"
cat "$work/err"
if [ "$got" -ne "$status" ]; then
  echo "FAIL: exit status $got, expected $status (124: it hung)"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  errors=$(grep -c "^iron: error: " "$work/err")
  if [ "$errors" -ne 1 ] || ! tail -n 1 "$work/err" | grep -q "^iron: error: "; then
    echo "FAIL: the error is not one line, the last on stderr"
    exit 1
  fi
  tail -n 1 "$work/err" | grep -Eq -- "$regex" || { echo "FAIL: the error does not match: $regex"; exit 1; }
else
  cat "$work/err" "${IRON_TEST_STDOUT:-$work/out}" 2>/dev/null | grep -Eq -- "$regex" ||
    { echo "FAIL: output does not match: $regex"; exit 1; }
fi
echo "ok"
