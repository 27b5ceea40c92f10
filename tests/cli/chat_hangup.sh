#!/usr/bin/env bash
# `iron chat` when its terminal goes (tmux): a hang-up at the prompt, a hang-up mid-answer, the
# same two under nohup (SIGHUP ignored: reads and writes then fail with EIO), and Ctrl-D at the
# prompt. Each must end within 5 s with status 0 (no core, no death by the signal) and no error
# line: the conversation is over, as at /exit.
#   chat_hangup.sh IRON MODEL [fast]
# "fast": the model answers a whole context before the test can hang up mid-answer
# (stories260K: 2,000 tokens in a third of a second), so the mid-answer cases are left out.
# Exit 77 (skipped) without tmux or the model.
set -u
[ -n "${IRON_CHAT_DEBUG:-}" ] && set -x
iron=$(realpath "$1")
model=$(realpath "$2" 2>/dev/null || echo "$2")
fast=${3:-}
command -v tmux >/dev/null || { echo "skipped: tmux is not installed (apt-get install tmux)"; exit 77; }
[ -f "$model" ] || { echo "skipped: $model is absent"; exit 77; }
work=$(mktemp -d)
server="iron_hangup_$$"
# On the way out, an iron chat still running (a failed case) is ended: the processes whose
# working directory is under $work are this test's.
cleanup() {
  tmux -L "$server" kill-server 2>/dev/null
  rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$server"  # a killed server leaves its socket file
  for proc in /proc/[0-9]*; do
    case "$(readlink "$proc/cwd" 2>/dev/null)" in "$work"/*) kill "${proc#/proc/}" 2>/dev/null ;; esac
  done
  rm -rf "$work"
}
trap cleanup EXIT
tmux_() { tmux -L "$server" "$@"; }
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# start NAME SIGHUP ARGS...: `iron chat` in a tmux session of its own, run from $work/NAME (where
# a core would land), stderr kept in $work/NAME.err. The pane's shell outlives the hang-up to
# write iron's exit status to $work/NAME.status: with SIGHUP "caught" its trap runs a command,
# which leaves iron the default disposition; "ignored" (trap '') passes the ignoring on, as nohup.
start() {
  local name=$1 hup=$2
  shift 2
  mkdir -p "$work/$name"
  local catch="trap 'true' HUP"
  [ "$hup" = ignored ] && catch="trap '' HUP"
  tmux_ new-session -d -s "$name" -x 200 -y 50 \
    "$catch; cd $(printf '%q' "$work/$name"); $(printf '%q ' "$iron" chat -m "$model" -t 2 "$@") 2>../$name.err; echo \$? > ../$name.status"
  for _ in $(seq 600); do
    tmux_ capture-pane -p -t "$name" 2>/dev/null | grep -q '^>' && return 0
    sleep 0.1
  done
  fail "$name: no prompt within 60 s"
  tmux_ capture-pane -p -t "$name"
  return 1
}

# A long answer under way: typed, then waited for until its first words show on the line after
# the question.
ask_long() {
  local name=$1 question="Write a very long story about a dragon who learns to cook."
  tmux_ send-keys -t "$name" -l "$question"
  tmux_ send-keys -t "$name" Enter
  for _ in $(seq 300); do
    [ -n "$(tmux_ capture-pane -p -t "$name" | grep -A1 -F "> $question" | sed -n 2p)" ] && return 0
    sleep 0.1
  done
  fail "$name: no answer began within 30 s"
}

# ended NAME: iron exited within 5 s of the hang-up (or Ctrl-D), status 0, no core, no error.
ended() {
  local name=$1
  for _ in $(seq 50); do
    [ -s "$work/$name.status" ] && break
    sleep 0.1
  done
  if [ ! -s "$work/$name.status" ]; then
    fail "$name: iron chat still running 5 s after its terminal went"
    return
  fi
  local status
  status=$(cat "$work/$name.status")
  [ "$status" = 0 ] || fail "$name: exit status $status, expected 0 (129: killed by SIGHUP; 134/139: a crash)"
  ls "$work/$name"/core* >/dev/null 2>&1 && fail "$name: a core was dumped"
  grep -q 'error' "$work/$name.err" && { fail "$name: an error on stderr:"; cat "$work/$name.err"; }
  echo "$name: ended with status $status"
}

# 1. Hang-ups at the prompt: SIGHUP, then a closed terminal under nohup.
start prompt_hup caught -n 24 -c 256 && { tmux_ kill-session -t prompt_hup; ended prompt_hup; }
start prompt_nohup ignored -n 24 -c 256 && { tmux_ kill-session -t prompt_nohup; ended prompt_nohup; }

# 2. Hang-ups mid-answer (an answer as long as the context allows, which takes a real model far
# longer than 5 s).
if [ "$fast" != fast ]; then
  start answer_hup caught -n -1 -c 4096 && { ask_long answer_hup; tmux_ kill-session -t answer_hup; ended answer_hup; }
  start answer_nohup ignored -n -1 -c 4096 && { ask_long answer_nohup; tmux_ kill-session -t answer_nohup; ended answer_nohup; }
fi

# 3. Ctrl-D at the prompt: the end of input.
start eof caught -n 24 -c 256 && { tmux_ send-keys -t eof C-d; ended eof; }

[ "$failed" = 0 ] && echo "PASS"
exit "$failed"
