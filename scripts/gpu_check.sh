#!/usr/bin/env bash
# Everything the GPU machine is for, in one go: build against the machine's
# own torch, run the whole test suite, the CUDA tests under compute-sanitizer
# (memcheck, racecheck, initcheck) and the benchmark. Logs go to the folder
# given (default: gpu-logs/); a summary is printed last.
# Usage: scripts/gpu_check.sh [LOG_DIR] [bench args...]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
logs="$(mkdir -p "${1:-gpu-logs}" && cd "${1:-gpu-logs}" && pwd)"
shift || true
export FGL_PYTHON="${FGL_PYTHON_GPU:-python3}"
export FGL_BUILD_DIR="${FGL_BUILD_DIR_GPU:-$FGL_ROOT/build-gpu}"
summary="$logs/summary.txt"
: >"$summary"
step() {  # step NAME COMMAND...: runs, logs, records pass/fail and seconds
  local name="$1"; shift
  local t0=$SECONDS
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(tail -n 1 "$logs/$name.log")" | tee -a "$summary"
  return $rc
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm \
    --format=csv,noheader
  nvcc --version | tail -n 1
  "$FGL_PYTHON" -c 'import torch; print("torch", torch.__version__)'
} >"$logs/machine.txt" 2>&1
cat "$logs/machine.txt"

step build "$FGL_ROOT/scripts/build.sh" -DFGL_BUILD_BENCH=ON || exit 1
tests="$FGL_BUILD_DIR/tests/fgl_tests"
step ctest ctest --test-dir "$FGL_BUILD_DIR" --output-on-failure \
  --parallel 8
grep -E "tests passed|tests failed|Total Test time" "$logs/ctest.log" \
  | tee -a "$summary"
# The sanitizers replay the CUDA-touching tests with every problem on the
# fused kernels. memcheck takes the whole sweep; racecheck and initcheck,
# which are far slower, take one shape per kernel.
export FGL_CUDA_FUSED_ONLY=1
step sanitizer-memcheck timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$tests" --gtest_brief=1 --gtest_filter='*Sweep*:*Cuda*'
few='*Sweep*R4_B12_H32_K56_Float:*Sweep*R4_B12_H32_K56_BFloat16'
few+=':*Sweep*R5_B70_H33_K130_Half:*Sweep*R2_B64_H8_K33_Float:*Cuda*'
for tool in racecheck initcheck; do
  step "sanitizer-$tool" timeout 180 compute-sanitizer --tool "$tool" --error-exitcode 9 \
    "$tests" --gtest_brief=1 --gtest_filter="$few"
done
unset FGL_CUDA_FUSED_ONLY
if [ -x "$FGL_BUILD_DIR/bench/fgl_bench" ]; then
  step bench "$FGL_BUILD_DIR/bench/fgl_bench" --json "$logs/bench.json" "$@"
  # Where the fused kernels stand against cuBLAS on the problems the
  # dispatcher sends to cuBLAS (the threshold in ops/cuda/).
  FGL_CUDA_FUSED_ONLY=1 step bench-fused-only "$FGL_BUILD_DIR/bench/fgl_bench" \
    --json "$logs/bench-fused-only.json" --replays 10 --calls-per-graph 3 \
    --dtypes float32,bfloat16 \
    --shapes "32,4096,128,4096;8,65536,64,512;16,512,128,1024;8,128,64,512"
  cat "$logs/bench.log" "$logs/bench-fused-only.log"
fi
echo "==== summary"
cat "$summary"
