#!/usr/bin/env bash
# Runs a command that reads FILE from ../shared/: when FILE is absent, skips (exit 77, which
# ctest reports as skipped) naming it, or fails under IRON_REQUIRE_SHARED=1 (scripts/test.sh
# sets it whenever ../shared/ is there).
#   tests/needs_shared.sh FILE COMMAND [ARGS...]
file=$1
shift
if [ ! -f "$file" ]; then
  if [ "${IRON_REQUIRE_SHARED:-0}" = 1 ]; then
    echo "$file is absent (IRON_REQUIRE_SHARED=1)" >&2
    exit 1
  fi
  echo "skipped: $file is absent (../shared/ is not beside the repository)"
  exit 77
fi
exec "$@"
