#!/usr/bin/env bash
# The test files (paths under tests/, ';'-separated, for -DIRON_TEST_FILES=) that define the
# GoogleTest suites matching an extended regex, as TEST, TEST_F or TEST_P, or as an
# INSTANTIATE_TEST_SUITE_P. A stage that runs some suites alone (ThreadSanitizer's in
# scripts/test.sh, the ARM64 one in scripts/test-arm64.sh) compiles only these: each test file
# stands alone, its helpers in headers.
#   scripts/test-files.sh 'Graph|ThreadPool|[A-Za-z0-9_]*CarriedLoop[A-Za-z0-9_]*'
set -euo pipefail
[ $# = 1 ] && [ -n "$1" ] || { echo "usage: $0 SUITE_REGEX" >&2; exit 2; }
cd "$(dirname "$0")/../tests"
files=$(grep -rlE "^(TEST|TEST_F|TEST_P)\(($1),|^INSTANTIATE_TEST_SUITE_P\([A-Za-z0-9_]+, *($1)," \
  --include='*_test.cpp' . | sed 's|^\./||' | sort | paste -sd';')
[ -n "$files" ] || { echo "$0: no test file defines a suite matching '$1'" >&2; exit 1; }
echo "$files"
