#!/usr/bin/env bash
# Layers, ZeRO hooks, the trainer and the examples call tensor ops (framework/backend/ops/ops.hpp)
# only, never a backend's kernels: fails naming every file:line under the given folders that
#   - includes a header of framework/backend/cpu/ other than kernels.hpp, or a backend-side header
#     of framework/backend/ops/ (op_table.hpp, cpu_f32.hpp) — op_table.hpp is allowed only to ask
#     whether the build has CUDA kernels: `ops::cuda_op_table()` tested, never dereferenced or
#     kept, and nothing else of the header used;
#   - calls cpu:: anything but set_num_threads / num_threads (the thread count a program may set),
#     or includes kernels.hpp without using only those;
#   - opens or imports namespace cpu (using namespace, namespace alias, namespace strata::cpu {);
#   - calls the optimizer or overflow kernels directly (optim::adamw_step..., precision::has_inf_or_nan)
#     instead of ops::adamw_step / sgd_step / has_inf_or_nan.
# Usage: ops_only_lint.sh ROOT DIR... (DIRs relative to ROOT). Comments (// ...) are ignored.
set -euo pipefail
root="$1"
shift
count=0
report() {
  echo "$1: $2"
  count=$((count + 1))
}
allowed_cpu='^cpu::(set_num_threads|num_threads)$'
# True when $code (without its #include lines) uses op_table.hpp only as that question.
table_query_only() {
  local body
  body="$(grep -vE '^[[:space:]]*#[[:space:]]*include' <<<"$code" || true)"
  grep -qE '\bcuda_op_table\(\)' <<<"$body" &&
    ! grep -qE '\b(OpTable|op_table|cpu_op_table|check_complete)\b|cuda_op_table\(\)[[:space:]]*\)*[[:space:]]*(->|\.)|\*[[:space:]]*(ops::)?cuda_op_table|(^|[^=!<>])=[[:space:]]*(strata::)?(ops::)?cuda_op_table' <<<"$body"
}
while IFS= read -r -d '' f; do
  rel="${f#"$root"/}"
  # The file without // comments, line numbers kept.
  code="$(sed -e 's://.*$::' "$f")"
  uses_other_cpu=0
  while IFS= read -r hit; do
    [ -z "$hit" ] && continue
    line="${hit%%:*}"
    name="${hit#*:}"
    if ! [[ "$name" =~ $allowed_cpu ]]; then
      report "$rel:$line" "calls the CPU kernel $name (call ops:: instead)"
      uses_other_cpu=1
    fi
  done < <(grep -noE '\bcpu::[A-Za-z_][A-Za-z0-9_]*' <<<"$code" || true)
  while IFS= read -r hit; do
    [ -z "$hit" ] && continue
    line="${hit%%:*}"
    header="$(sed -E 's/.*#[[:space:]]*include[[:space:]]*[<"]([^">]*)[">].*/\1/' <<<"${hit#*:}")"
    if [ "$header" = "framework/backend/cpu/kernels.hpp" ]; then
      if ! grep -qE '\bcpu::(set_num_threads|num_threads)\b' <<<"$code" || [ "$uses_other_cpu" = 1 ]; then
        report "$rel:$line" "includes $header for more than the thread count (include framework/backend/ops/ops.hpp)"
      fi
    elif [ "$header" != "framework/backend/ops/op_table.hpp" ] || ! table_query_only; then
      report "$rel:$line" "includes the backend header $header (include framework/backend/ops/ops.hpp)"
    fi
  done < <(grep -nE '#[[:space:]]*include[[:space:]]*[<"]framework/backend/(cpu/|ops/(op_table|cpu_f32)\.hpp)' <<<"$code" || true)
  while IFS= read -r hit; do
    [ -z "$hit" ] && continue
    report "$rel:${hit%%:*}" "opens or imports the CPU kernels' namespace: ${hit#*:}"
  done < <(grep -nE '(using[[:space:]]+namespace|namespace[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*=)[[:space:]]*(::)?(strata::)?cpu\b|namespace[[:space:]]+(strata::)?cpu\b' <<<"$code" || true)
  while IFS= read -r hit; do
    [ -z "$hit" ] && continue
    report "$rel:${hit%%:*}" "calls the kernel ${hit#*:} directly (use the ops:: op)"
  done < <(grep -noE '\b(optim::(adamw_step|adamw_step_out16|sgd_step|sgd_step_out16)|precision::has_inf_or_nan)\b' <<<"$code" || true)
done < <(for d in "$@"; do
  find "$root/$d" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0
done | sort -z)
if [ "$count" -gt 0 ]; then
  echo "$count violations: layers, hooks, the trainer and examples must call framework/backend/ops/ops.hpp only"
  exit 1
fi
echo "ops only: no backend kernel used under $*"
