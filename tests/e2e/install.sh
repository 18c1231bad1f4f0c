#!/usr/bin/env bash
# `cmake --install` and a model written outside this tree (examples/out_of_tree), as a user gets
# them: install the built tree into a temporary prefix, check that it names no path of this
# machine's source or build tree, move it (relocatable), then — from a copy of the example outside
# the source tree, so only the installed headers are visible — build the example with
# find_package(Strata) and each public header alone, and train it through the installed
# `strata run`: np 2 (ZeRO-3, optimizer and parameters offloaded, micro-batch 4) equals np 1 (ZeRO 0,
# micro-batch 8) to 1e-6 relative in every step's loss (another summation order of the gradient
# reduction), and 3 + 3 resumed steps equal 6 straight ones bitwise (losses and exported weights).
# The package version, strata/version.hpp and `strata version` agree.
# usage: install.sh BUILD_DIR SOURCE_DIR CXX_COMPILER
set -u
build=$(realpath "$1") source=$(realpath "$2") cxx="$3"
work=$(mktemp -d /tmp/strata_install_XXXXXX)
trap 'rm -rf "$work"' EXIT
die() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log "$work"/run/*/log; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done >&2
  exit 1
}
t0=$SECONDS

# 1. Install, and look at what was installed.
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || die "cmake --install failed"
p="$work/prefix"
for f in bin/strata bin/train_gpt lib/libstrata_core.a lib/libstrata_parallel.a \
    lib/cmake/Strata/StrataConfig.cmake lib/cmake/Strata/StrataConfigVersion.cmake \
    lib/cmake/Strata/StrataTargets.cmake lib/pkgconfig/strata.pc include/strata/strata.hpp \
    include/strata/model.hpp include/strata/training.hpp include/strata/version.hpp; do
  [[ -e $p/$f ]] || die "the installed tree lacks $f"
done
# Only the headers the public ones reach: never the launcher's, the tests', or a test-only header.
[[ ! -e $p/include/strata/launcher && ! -e $p/include/strata/tests ]] || die "internal headers were installed"
# Installed headers include each other under strata/ (one include root).
bad=$(grep -rhE '#include "(framework|parallel|offload)/' "$p/include" | head -3)
[[ -z $bad ]] || die "installed headers include by source-tree paths: $bad"
# No path of this machine's trees in any installed file: text files (package, headers, strata.pc),
# libraries and programs. (The CUDA kernels' line tables would record the build folder: they are
# on only with STRATA_CUDA_LINEINFO, the GPU check's build, never one that is installed.)
for f in $(grep -rlF -e "$source" -e "$build" "$p"); do
  if grep -qI . "$f"; then
    die "the installed text file $f names a path of this machine: $(grep -nF -e "$source" -e "$build" "$f" | head -2)"
  fi
  hits=$(strings -a "$f" | grep -F -e "$source" -e "$build" | sort -u | head -3)
  [[ -z $hits ]] || die "the installed $f names a path of this machine: $hits"
done
mv "$p" "$work/moved"  # relocatable: everything below uses the moved prefix
p="$work/moved"
echo "installed $(find "$p" -type f | wc -l) files ($(find "$p/include" -type f | wc -l) headers), $((SECONDS - t0)) s" >&2

# 2. Versions agree: the package, strata/version.hpp, `strata version`.
v_cmd=$("$p/bin/strata" version | head -1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+')
v_hdr=$(grep -oE 'STRATA_VERSION_STRING "[^"]+"' "$p/include/strata/version.hpp" | cut -d'"' -f2)
v_pkg=$(grep -oE '^set\(PACKAGE_VERSION "[^"]+"' "$p/lib/cmake/Strata/StrataConfigVersion.cmake" | cut -d'"' -f2)
[[ -n $v_cmd && $v_cmd == "$v_hdr" && $v_cmd == "$v_pkg" ]] ||
  die "versions disagree: strata version '$v_cmd', version.hpp '$v_hdr', package '$v_pkg'"

# 3. Build the example from a copy outside the source tree, and each public header alone.
cp -r "$source/examples/out_of_tree" "$work/mixer"
mkdir -p "$work/headers"
for h in "$p"/include/strata/*.hpp; do
  n=$(basename "$h" .hpp)
  printf '#include <strata/%s.hpp>\n' "$n" >"$work/headers/$n.cpp"
done
# docs/api.md's "your own model" guide, as written there.
mkdir -p "$work/headers/guide"
awk '/^```cpp/{f=1; next} /^```/{f=0} f' "$source/docs/api.md" >"$work/headers/guide/guide.cpp"
[[ $(wc -l <"$work/headers/guide/guide.cpp") -gt 50 ]] || die "no C++ guide found in docs/api.md"
cat >"$work/headers/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(headers LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(Strata $v_cmd EXACT REQUIRED)
file(GLOB srcs *.cpp)
add_library(headers OBJECT \${srcs})
target_link_libraries(headers PRIVATE Strata::strata)
add_executable(guide guide/guide.cpp)
target_link_libraries(guide PRIVATE Strata::strata)
CM
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
for proj in mixer headers; do
  cmake -S "$work/$proj" -B "$work/$proj-build" -G Ninja -DCMAKE_PREFIX_PATH="$p" \
    -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" >"$work/$proj-configure.log" 2>&1 ||
    die "configuring $proj against the installed Strata failed"
done
t1=$SECONDS
ninja -C "$work/mixer-build" -j2 >"$work/mixer-build.log" 2>&1 || die "building the example failed"
ninja -C "$work/headers-build" -j2 >"$work/headers-build.log" 2>&1 ||
  die "a public header does not compile alone, or docs/api.md's guide does not build"
echo "configured and built the example and $(ls "$work"/headers/*.cpp | wc -l) public headers alone, $((SECONDS - t1)) s" >&2

# strata.pc: its flags compile a public header, and link the example's objects into a program.
export PKG_CONFIG_PATH="$p/lib/pkgconfig"
pkg-config --exists strata || die "pkg-config does not find strata.pc"
[[ $(pkg-config --modversion strata) == "$v_cmd" ]] || die "strata.pc's version is not $v_cmd"
# shellcheck disable=SC2046
echo '#include <strata/training.hpp>' | "$cxx" -std=c++20 -fsyntax-only $(pkg-config --cflags strata) -x c++ - ||
  die "pkg-config --cflags strata does not compile strata/training.hpp"
# shellcheck disable=SC2046
"$cxx" "$work"/mixer-build/CMakeFiles/mixer.dir/*.o $(pkg-config --libs strata) -o "$work/mixer-pc" ||
  die "the example's objects do not link with pkg-config --libs strata"
"$work/mixer-pc" --help >/dev/null || die "the example linked through pkg-config does not run"

# 4. Train it through the installed `strata run`.
mixer="$work/mixer-build/mixer"
cat >"$work/config.json" <<JSON
{
  "train_batch_size": 8,
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
  "strata": {"seed": 11, "train_steps": STEPS}
}
JSON
# run NAME NP STEPS ARGS...: the example in $work/run/NAME (log, metrics m.jsonl, checkpoints ck).
run() {
  local dir="$work/run/$1" np="$2" steps="$3"
  shift 3
  mkdir -p "$dir"
  sed "s/STEPS/$steps/" "$work/config.json" >"$dir/config.json"
  (cd "$dir" && "$p/bin/strata" run -n "$np" --max-restarts 0 --log-dir logs -- "$mixer" \
    --config config.json --metrics m.jsonl --checkpoint-dir ck "$@" >>log 2>&1)
}
losses() { grep -o '"loss": [^,]*' "$1" | sed 's/"loss": //'; }
offload=(--set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu
  --set zero_optimization.offload_param.device=cpu)
t2=$SECONDS
run one 1 8 --set zero_optimization.stage=0 || die "np 1 run failed"
run two 2 8 "${offload[@]}" || die "np 2 ZeRO-3 + offload run failed"
grep -q "mixer (Strata $v_cmd)" "$work/run/one/log" || die "the example did not print Strata $v_cmd"
grep -q "on 2 ranks, ZeRO stage 3" "$work/run/two/log" || die "the np 2 run was not ZeRO-3 on 2 ranks"
[[ $(losses "$work/run/one/m.jsonl" | wc -l) == 8 && $(losses "$work/run/two/m.jsonl" | wc -l) == 8 ]] ||
  die "both runs must log 8 losses"
paste <(losses "$work/run/one/m.jsonl") <(losses "$work/run/two/m.jsonl") |
  awk '{d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > w) w = r}
       END {printf "np 2 vs np 1: worst loss difference %.2e relative\n", w; exit !(w <= 1e-6)}' >&2 ||
  die "np 2 losses differ from np 1 by more than 1e-6 relative"
# The guide of docs/api.md trains too (np 2, ZeRO-3, checkpoints).
mkdir -p "$work/run/guide"
sed "s/STEPS/3/" "$work/config.json" >"$work/run/guide/config.json"
(cd "$work/run/guide" && "$p/bin/strata" run -n 2 --max-restarts 0 --log-dir logs -- \
  "$work/headers-build/guide" config.json zero_optimization.stage=3 strata.checkpoint.dir=ck >log 2>&1) ||
  die "docs/api.md's guide failed to train"
grep -q "step 3 loss" "$work/run/guide/log" && [[ -f $work/run/guide/ck/step_00000003/manifest.json ]] ||
  die "docs/api.md's guide did not train 3 steps and save a checkpoint"
run a 2 6 "${offload[@]}" || die "straight run failed"
run b 2 6 "${offload[@]}" --exit-after-steps 3 || die "interrupted run failed"
[[ -f $work/run/b/ck/step_00000003/manifest.json ]] || die "no checkpoint at step 3"
run b 2 6 "${offload[@]}" || die "resumed run failed"
grep -q "resumed from ck/step_00000003: step 3" "$work/run/b/log" || die "the second run did not resume"
[[ $(losses "$work/run/a/m.jsonl" | wc -l) == 6 ]] || die "the straight run did not log 6 losses"
diff <(losses "$work/run/a/m.jsonl") <(losses "$work/run/b/m.jsonl") >&2 ||
  die "losses of the resumed run differ from the straight run"
"$p/bin/strata" ckpt export "$work/run/a/ck" --output "$work/a.h5" >/dev/null || die "export of a failed"
"$p/bin/strata" ckpt export "$work/run/b/ck" --output "$work/b.h5" >/dev/null || die "export of b failed"
h5diff --exclude-attribute / "$work/a.h5" "$work/b.h5" >&2 ||
  die "exported weights of the resumed run differ from the straight run"
echo "trained: np 2 = np 1, resume bitwise, $((SECONDS - t2)) s; whole test $((SECONDS - t0)) s" >&2
echo "install: relocatable prefix, the out-of-tree example built and trained against it"
