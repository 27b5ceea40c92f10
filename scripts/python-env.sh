#!/usr/bin/env bash
# The project's Python environment: a virtual environment in .venv/ (git-ignored; Debian's own
# Python is externally managed, so nothing is installed into it), created on first use, with the
# PyPI packages named on the command line installed where missing. Prints the environment's
# python, so a caller can write:   py=$(scripts/python-env.sh numpy pytest)
# IRON_VENV=DIR puts the environment elsewhere. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${IRON_VENV:-$PWD/.venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "creating the Python environment $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
fi
missing=()
for spec in "$@"; do
  # The distribution's name is what precedes a version bound or an extra.
  name=${spec%%[<>=!~\[]*}
  "$venv/bin/python" -m pip show -q "$name" >/dev/null 2>&1 || missing+=("$spec")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing into $venv: ${missing[*]}" >&2
  "$venv/bin/python" -m pip install -q "${missing[@]}" >&2
fi
echo "$venv/bin/python"
