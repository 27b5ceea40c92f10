#!/usr/bin/env bash
# `iron chat` on a real terminal (tmux): a three-turn conversation whose later turns prefill only
# their new tokens (/stats), a paste of several lines as one message, Ctrl-C mid-answer, /clear,
# /save then /load in a fresh session giving the same next answer (greedy), and a full context
# with a small -c; piped, one turn gives generate --chat's answer.
#   chat_terminal.sh IRON MODEL [fast]
# "fast": the model answers a whole context faster than a keystroke can interrupt it
# (stories260K: 2,000 tokens in a third of a second), so Ctrl-C is checked only at the prompt.
# Exit 77 (skipped) without tmux or the model.
set -u
[ -n "${IRON_CHAT_DEBUG:-}" ] && set -x
iron=$(realpath "$1")
model=$(realpath "$2" 2>/dev/null || echo "$2")
fast=${3:-}
command -v tmux >/dev/null || { echo "tmux is not installed (apt-get install tmux)"; exit 77; }
[ -f "$model" ] || { echo "$model is absent"; exit 77; }
work=$(mktemp -d)
# Each start() runs its own tmux server (socket iron_chat_PID_N): reusing one socket, a new
# session could reach the server the last kill-server was still taking down, and die with it
# ("server exited unexpectedly", seen with the Release tests loading both cores).
session="iron_chat_$$"
starts=0
sockets="${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)"  # where tmux -L keeps them (a killed server leaves its file)
trap 'for n in $(seq 0 "$starts"); do tmux -L "${session}_$n" kill-server 2>/dev/null; rm -f "$sockets/${session}_$n"; done; rm -rf "$work"' EXIT
tmux_() { tmux -L "${session}_$starts" "$@"; }
fail() { echo "FAIL: $*"; echo "--- screen:"; cat "$work/screen"; exit 1; }

# Waits (at most 60 s) until the screen's last non-empty line is the prompt "> ", n times counted
# from the start of the session; leaves the screen in $work/screen.
prompts=0
wait_prompt() {
  prompts=$((prompts + 1))
  for _ in $(seq 600); do
    tmux_ capture-pane -p -S -2000 -t chat > "$work/screen"
    [ "$(grep -cE '^>( |$)' "$work/screen")" -ge "$prompts" ] && [ "$(grep -v '^$' "$work/screen" | tail -n 1)" = ">" ] && return 0
    sleep 0.1
  done
  fail "no prompt #$prompts within 60 s"
}
start() {  # start ARGS...: a fresh session running iron chat, on a server of its own
  tmux_ kill-server 2>/dev/null
  starts=$((starts + 1))
  prompts=0
  tmux_ new-session -d -s chat -x 220 -y 200 "$(printf '%q ' "$iron" chat -m "$model" -t 2 "$@"); echo \"(chat exited: \$?)\"; sleep 30"
  wait_prompt
}
say() { tmux_ send-keys -t chat -l "$1"; tmux_ send-keys -t chat Enter; wait_prompt; }

# 0. Piped: one line, one turn, the same answer as `iron generate --chat`.
echo "Hi, who are you?" | "$iron" chat -m "$model" -t 2 -n 24 -c 1024 > "$work/piped" 2>/dev/null
"$iron" generate -m "$model" -t 2 -n 24 -c 1024 --chat -p "Hi, who are you?" > "$work/generated" 2>/dev/null
cmp -s "$work/piped" "$work/generated" || { echo "FAIL: piped chat and generate --chat differ:"; cat "$work/piped" "$work/generated"; exit 1; }

# 1. Three turns: each later turn prefills only what the cache did not hold: the cache after it
# is the cache before, what it prefilled, and its answer but the last token (never fed back).
start -n 24 -c 1024
say "Hi, who are you?"; say "/stats"
say "What is 2+2?"; say "/stats"
say "And 3+3?"; say "/stats"
grep '^cache: ' "$work/screen" | sed -E 's/cache: ([0-9]+) tokens; last turn prefilled ([0-9]+) tokens; last answer ([0-9]+) tokens.*/\1 \2 \3/' > "$work/stats"
cat "$work/stats"
[ "$(wc -l < "$work/stats")" -eq 3 ] || fail "three /stats lines expected"
awk 'NR > 1 && $1 != before + $2 + $3 - 1 { bad = 1 } { before = $1 } END { exit bad }' "$work/stats" ||
  fail "a later turn prefilled tokens the cache already held"

# 2. Lines pasted together are one message (one answer, one prompt after it).
tmux_ send-keys -t chat -l $'Remember these:\rapple\rpear\r'
wait_prompt
grep -q '^\. pear$' "$work/screen" || fail "a pasted line was not joined to the message"

# 3. /clear empties the cache.
say "/clear"; say "/stats"
grep -q '^cache: 0 tokens' "$work/screen" || fail "/clear left tokens in the cache"

# 4. Ctrl-C mid-answer: the answer stops, the prompt comes back, the conversation goes on. At the
# prompt, one Ctrl-C says how to leave and a second leaves.
start -n -1 -c 1024
if [ "$fast" != fast ]; then
  tmux_ send-keys -t chat -l "Write a very long story about a dragon who learns to cook."; tmux_ send-keys -t chat Enter
  sleep 0.5
  tmux_ send-keys -t chat C-c
  wait_prompt
  grep -q '(interrupted)' "$work/screen" || fail "Ctrl-C did not interrupt the answer"
  say "/stats"
  grep 'last answer' "$work/screen" | tail -n 1 | grep -q '(interrupted)$' || fail "/stats does not report the interruption"
  say "Go on."
fi
tmux_ send-keys -t chat C-c
wait_prompt
grep -q 'Ctrl-C again' "$work/screen" || fail "no hint after a Ctrl-C at the prompt"
tmux_ send-keys -t chat C-c
sleep 1
tmux_ capture-pane -p -S -2000 -t chat > "$work/screen"
grep -q '(chat exited: 0)' "$work/screen" || fail "a second Ctrl-C at the prompt did not leave"

# 5. /save, then /load in a fresh session: the same next answer.
start -n 24 -c 1024 --system "You are a terse assistant."
say "Name a colour."
say "/save $work/conversation.json"
say "Name another one."
expected=$(grep -A1 '^> Name another one.$' "$work/screen" | tail -n 1)
start -n 24 -c 1024
say "/load $work/conversation.json"
say "Name another one."
got=$(grep -A1 '^> Name another one.$' "$work/screen" | tail -n 1)
echo "after /save: $expected"
echo "after /load: $got"
[ -n "$expected" ] && [ "$expected" = "$got" ] || fail "the loaded conversation answered differently"

# 6. A full context: the oldest turns go, with one notice, and the chat goes on.
start -n 24 -c 128
for i in 1 2 3 4 5; do say "Tell me a fact about the number $i."; done
grep -q 'note: the context was full' "$work/screen" || fail "no notice of a full context"
say "/stats"
echo "PASS"
