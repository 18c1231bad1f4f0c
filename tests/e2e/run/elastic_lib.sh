# Sourced by the elastic e2e scripts (netns_elastic.sh, slurm_elastic.sh) and netns_train_gpt.sh:
# the pieces they share.
# Needs the script's $train_gpt (the binary the ranks run).

# The last step rank $2 reported in progress directory $1 (-1: none yet; "done N" counts as N).
rank_step() {
  local s
  s=$(cat "$1/rank_$(printf %05d "$2").progress" 2>/dev/null) || { echo -1; return; }
  echo "${s#done }"
}

# The train_gpt processes inside node $1's network namespace (cluster/netns's strata-$1, or
# $STRATA_NETNS_PREFIX-$1).
node_ranks() {
  local p
  for p in $(ip netns pids "${STRATA_NETNS_PREFIX:-strata}-$1"); do
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

# compare_exports REF RUN: two `strata ckpt export` files (HDF5, one f32 dataset per parameter);
# each parameter's relative L2 difference ||run - ref|| / ||ref|| within 1e-5, the bound the 3D
# tests hold masters to, and as there (tests/dist/pipeline/pipeline_fixture.hpp, compare_weights)
# the key third of each attn.c_attn.bias by its largest absolute difference, within 1e-4: its
# gradient is zero in exact arithmetic, so Adam moves it by +-lr times round-off whose sign
# follows the summation order. Prints the largest of each. Non-zero (saying why) when not.
compare_exports() {
  local names worst="0 none" key=0 n out
  names=$(h5ls -r "$1" | awk '$2 == "Dataset" {print $1}') || return 1
  [[ -n "$names" ]] || { echo "$1 holds no datasets"; return 1; }
  for n in $names; do
    h5dump -y -w 0 -o "$1.vals" -d "$n" "$1" >/dev/null || { echo "no $n in $1"; return 1; }
    h5dump -y -w 0 -o "$2.vals" -d "$n" "$2" >/dev/null || { echo "no $n in $2"; return 1; }
    out=$(paste -d' ' <(tr -s ', \n' '\n\n\n' <"$1.vals" | grep -v '^$') \
                      <(tr -s ', \n' '\n\n\n' <"$2.vals" | grep -v '^$') |
      awk -v name="$n" -v prev="$worst" -v key="$key" '
        { a[NR] = $1; b[NR] = $2; if (NF != 2) bad = 1 }
        END { kb = name ~ /attn\.c_attn\.bias$/
              for (i = 1; i <= NR; i++) {
                d = b[i] - a[i]
                if (kb && i > NR / 3 && i <= 2 * NR / 3) { if (d < 0) d = -d; if (d > key) key = d }
                else { dd += d * d; rr += a[i] * a[i] } }
              r = rr > 0 ? sqrt(dd / rr) : sqrt(dd)
              if (bad || NR == 0) r = 1e30
              split(prev, p, " ")
              print (r > p[1] ? r " " name : prev), key }')
    worst=${out% *} key=${out##* }
  done
  echo "final export: largest relative L2 difference of a parameter ${worst% *} (${worst#* }); key biases: largest absolute difference $key"
  awk -v r="${worst% *}" -v k="$key" 'BEGIN { exit !(r <= 1e-5 && k <= 1e-4) }'
}
