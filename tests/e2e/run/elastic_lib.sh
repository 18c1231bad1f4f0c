# Sourced by the elastic e2e scripts (netns_elastic.sh, slurm_elastic.sh): the pieces both use.
# Needs the script's $train_gpt (the binary the ranks run).

# The last step rank $2 reported in progress directory $1 (-1: none yet; "done N" counts as N).
rank_step() {
  local s
  s=$(cat "$1/rank_$(printf %05d "$2").progress" 2>/dev/null) || { echo -1; return; }
  echo "${s#done }"
}

# The train_gpt processes inside node $1's network namespace (cluster/netns's strata-$1).
node_ranks() {
  local p
  for p in $(ip netns pids "strata-$1"); do
    [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$(readlink -f "$train_gpt")" ]] && echo "$p"
  done
}

# hold_until_growing NODE LOG PROGRESS_DIR [STOP_S]: holds NODE's ranks until the launcher writes
# "growing to 2 nodes at the next step" in LOG. On an idle machine the ranks left can finish the
# remaining steps (20 to 50 ms each) before the launcher's next probe finds the node that came back
# (every --node-grace / 2 s, a probe taking up to its 10 s limit), and the job then never grows: so
# they are stopped (SIGSTOP, STOP_S seconds at a time, default 1) and let make one step in between
# (rank 0's step in PROGRESS_DIR moves; stopped again within 10 ms), at most 30 times. The watchdog
# must allow STOP_S plus the slowest step: with --watchdog 3, a 2 s hold plus a step on a machine
# at load 15 made it fire. Timing only: the ranks' arithmetic is untouched.
hold_until_growing() {
  local node=$1 log=$2 progress=$3 stop_s=${4:-1} held at
  held=$(node_ranks "$node")
  [[ -n $held ]] || return
  for _ in $(seq 1 30); do
    grep -q "growing to 2 nodes at the next step" "$log" 2>/dev/null && return
    kill -STOP $held 2>/dev/null || return  # the ranks are gone
    for _ in $(seq 1 $((stop_s * 10))); do
      grep -q "growing to 2 nodes at the next step" "$log" 2>/dev/null && break
      sleep 0.1
    done
    at=$(rank_step "$progress" 0)
    kill -CONT $held 2>/dev/null
    for _ in $(seq 1 500); do (($(rank_step "$progress" 0) != at)) && break; sleep 0.01; done
  done
}

# Every step's loss in metrics file $1 ("step loss" lines; the last line of a step that was run
# twice).
losses() {
  sed -n 's/.*"loss":\([^,]*\),.*"step":\([0-9]*\),.*/\2 \1/p' "$1" |
    awk '{l[$1] = $2} END {for (s in l) print s, l[s]}' | sort -n
}

# compare_losses REF RUN STEPS: RUN (a metrics file) logged STEPS steps, each loss within 1e-5
# relative of REF's; prints the largest difference. Non-zero (saying why) when not.
compare_losses() {
  losses "$1" >"$1.losses"
  losses "$2" >"$2.losses"
  [[ $(wc -l <"$2.losses") == "$3" ]] || { echo "$2 logged $(wc -l <"$2.losses") steps, not $3"; return 1; }
  join "$1.losses" "$2.losses" | awk '
    { d = $2 - $3; if (d < 0) d = -d; r = d / $2; if (r > worst) worst = r; if (d > 0) differ++
      if (r > 1e-5) { print "step " $1 ": elastic " $3 " vs uninterrupted " $2; bad = 1 } }
    END { printf "losses: %d steps, %d not bitwise equal, largest relative difference %.3g\n", NR, differ, worst; exit bad }'
}
