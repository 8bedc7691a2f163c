#!/usr/bin/env bash
# Everything the GPU machine is for, in one go: build against the machine's
# own torch, run the whole test suite (the CUDA tests run instead of
# skipping), fgl_infer on the GPU, the benchmark, and the CUDA tests under
# compute-sanitizer (memcheck, racecheck, initcheck; each fused kernel also
# alone through fgl_bench). Logs go to the folder given (default:
# gpu-logs/), eight files at most; a summary is printed last.
# Usage: scripts/gpu_check.sh [LOG_DIR] [fgl_bench args...]
# The Hopper tensor-core kernel is built only where CUTLASS's headers are
# found: nvidia-cutlass importable by that machine's Python (e.g. a carried
# wheel installed with pip --target and put on PYTHONPATH), or
# FGL_CUTLASS_INCLUDE_DIR; the summary says whether it was.
# FGL_GPU_CTEST_ARGS narrows the test step when GPU time is short, e.g. the
# CUDA-touching tests:
#   FGL_GPU_CTEST_ARGS='-R Cuda|Sweep|OnGpu|StreamKernel|WarpDotKernel|WarpMmaKernel|cuda[.]'
# FGL_GPU_STEPS picks the steps after the build (default: all of "tests cli
# bench memcheck race"), so that the whole check can run in shorter parts
# over one build tree, e.g. FGL_GPU_STEPS="tests cli bench", then "memcheck",
# then "race" (racecheck and initcheck).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
logs="$(mkdir -p "${1:-gpu-logs}" && cd "${1:-gpu-logs}" && pwd)"
shift || true
export FGL_PYTHON="${FGL_PYTHON_GPU:-python3}"
export FGL_BUILD_DIR="${FGL_BUILD_DIR_GPU:-$FGL_ROOT/build-gpu}"
summary="$logs/summary.txt"
steps=" ${FGL_GPU_STEPS:-tests cli bench memcheck race} "
for s in $steps; do
  case "$s" in
    tests | cli | bench | memcheck | race) ;;
    *) echo "FGL_GPU_STEPS: unknown step '$s' (tests, cli, bench, memcheck, race)" >&2
       exit 64 ;;
  esac
done
wants() { [[ "$steps" == *" $1 "* ]]; }
step() {  # step NAME COMMAND...: runs, appends to NAME.log, records rc and time
  local name="$1"; shift
  local t0=$SECONDS
  "$@" >>"$logs/$name.log" 2>&1
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
} >"$summary" 2>&1
cat "$summary"

# NOTE: build with the system C++ compiler, the one whose libstdc++ a Python
# process loads. A toolchain that carries its own libstdc++ gives
# libfgl_ops.so a second copy of the iostream internals, which crashes inside
# Python the first time the op formats an error message.
if [ -x /usr/bin/g++ ]; then
  export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
step build "$FGL_ROOT/scripts/build.sh" -DFGL_BUILD_BENCH=ON \
  ${FGL_CUTLASS_INCLUDE_DIR:+-DFGL_CUTLASS_INCLUDE_DIR="$FGL_CUTLASS_INCLUDE_DIR"} ||
  exit 1
grep -h -m1 "tensor-core kernel" "$logs/build.log" | tee -a "$summary"
# Each test process gets its share of the cores: eight processes with a
# thread per core each oversubscribe the machine eightfold, and the sweep
# then ran past the time this script is given.
if wants tests; then
  jobs=8
  threads=$(( $(nproc) / jobs )); [ "$threads" -ge 1 ] || threads=1
  # shellcheck disable=SC2086  # FGL_GPU_CTEST_ARGS holds several arguments
  step ctest env OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" \
    ctest --test-dir "$FGL_BUILD_DIR" --output-on-failure --parallel "$jobs" \
    ${FGL_GPU_CTEST_ARGS:-}
  grep -E "tests passed|tests failed|Total Test time" "$logs/ctest.log" \
    | tee -a "$summary"
fi

# fgl_infer on the GPU: the demo, a real file pair (an attention output
# projection: 32 heads of 128 for 16 tokens and for 1; an
# nn.Linear(4096, 4096) state_dict), benchmark mode in bfloat16, and the
# tensor-parallel runner over the GPUs there are (one: its NCCL group of one
# rank, on the calling thread).
if wants cli; then
  infer="$FGL_BUILD_DIR/app/fgl_infer"
  data="$(mktemp -d)"
  "$FGL_PYTHON" - "$data" <<'PY'
import sys, torch
d = sys.argv[1]
torch.save({"prefill": torch.randn(32, 16, 128), "decode": torch.randn(32, 1, 128)},
           f"{d}/x.pt")
torch.save(torch.nn.Linear(4096, 4096).state_dict(), f"{d}/w.pt")
PY
  step cli "$infer" --device cuda
  step cli "$infer" --device cuda --input "$data/x.pt" --weights "$data/w.pt" \
    --output "$data/y.pt"
  step cli "$infer" --device cuda --input "$data/x.pt" --weights "$data/w.pt" \
    --dtype bfloat16 --warmup 20 --iters 200
  gpus=$(nvidia-smi --list-gpus | wc -l)
  step cli "$infer" --tensor-parallel "$(( gpus < 2 ? gpus : 2 ))" \
    --input "$data/x.pt" --weights "$data/w.pt" --dtype bfloat16 \
    --warmup 20 --iters 200
  rm -rf "$data"
fi

if wants bench && [ -x "$FGL_BUILD_DIR/bench/fgl_bench" ]; then
  step bench "$FGL_BUILD_DIR/bench/fgl_bench" --json "$logs/bench.json" "$@"
fi

# The sanitizers replay the CUDA-touching tests (the sweep forces every
# fused kernel in turn). memcheck takes the whole sweep; racecheck and
# initcheck, which are far slower, take a few shapes, and leave the chain of
# dependent launches (672 launches, weights of 64 MiB) to memcheck: under
# racecheck it ran past the step's time without a report.
# memcheck runs without PyTorch's caching allocator: it hands out pieces of
# larger blocks, so a read past a tensor's end would land inside the block
# where memcheck cannot see it. racecheck and initcheck keep it: without it
# racecheck ran past its time (a cudaMalloc and cudaFree per tensor), and
# initcheck reported the host's copies of outputs the copy engine had
# stored, whose writes it does not track. fgl_bench cannot run without it
# (it aborts freeing what its CUDA graphs held); initcheck still sees a
# kernel read bytes never written inside a block.
tests="$FGL_BUILD_DIR/tests/fgl_tests"
if wants memcheck; then
  step memcheck env PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 300 \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_brief=1 \
    --gtest_filter='*Sweep*:*Cuda*:StreamKernel*:WarpDotKernel*:WarpMmaKernel*:TensorCoreKernel*'
fi
if wants race; then
  few='*Sweep*R4_B12_H32_K56_Float:*Sweep*R4_B12_H32_K56_BFloat16'
  few+=':*Sweep*R5_B70_H33_K130_Half:*Sweep*R8_B1_H64_K300_Half'
  few+=':*Sweep*R3_B4_H16_K77_Double:*Sweep*R32_B20_H128_K72_BFloat16:*Cuda*'
  few+=':StreamKernel.IsExactAndDeterministic'
  few+='-GatherLinearCuda.DependentLaunchesSeeTheCallsBeforeThem'
  for tool in racecheck initcheck; do
    step race-init timeout 150 compute-sanitizer --tool "$tool" \
      --error-exitcode 9 "$tests" --gtest_brief=1 --gtest_filter="$few"
  done

  # Each fused kernel alone (fgl_bench --fgl-only: no cuBLAS kernel in the
  # reports) under racecheck and initcheck, forced over a small shape it
  # takes: every schedule, out by plain stores (K = 300) and through the copy
  # engine (rows of 16-byte multiples); the cluster split's out four columns
  # a store (K = 700) and one (K odd); tiles 192 wide whose last columns
  # run past K, with a bias, under TF32 (1,130,128,257) and in float16
  # (3,1400,40,2300); the streaming kernel's copies of four stages
  # (float32, 43,16,768,64) and its x in a slab (7,4,64,200 and
  # 8,6,64,200); the warp-dot kernel's 16-byte and element-wide loads
  # (H = 33). A fourth field is a flag of fgl_bench's.
  bench="$FGL_BUILD_DIR/bench/fgl_bench"
  if [ -x "$bench" ]; then
    for run in wgmma:4,200,128,300:bfloat16 wgmma:4,200,128,300:float32 \
               wgmma-pingpong:4,200,128,300:bfloat16 \
               wgmma-split:16,130,128,700:bfloat16 \
               wgmma-split:16,130,128,701:bfloat16 \
               wgmma-stationary:2,333,64,72:float16 \
               wgmma:1,130,128,257:float32:--allow-tf32 \
               wgmma:3,1400,40,2300:float16 \
               wgmma-packed:13,300,4,520:float32 \
               wgmma-packed:5,700,32,301:bfloat16 \
               stream:32,16,128,1024:bfloat16 stream:32,16,128,1024:float32 \
               stream:43,16,768,64:float32 stream:7,4,64,200:float32 \
               stream:8,6,64,200:bfloat16 \
               warp-mma:8,64,64,256:bfloat16 warp-dot:4,12,32,56:float32 \
               warp-dot:3,20,33,80:bfloat16; do
      IFS=: read -r route shape dtype flag <<<"$run"
      for tool in racecheck initcheck; do
        step race-init timeout 100 compute-sanitizer --tool "$tool" \
          --error-exitcode 9 "$bench" --device cuda --fgl-only \
          --route "$route" --shapes "$shape" --dtypes "$dtype" \
          --rotate-mib 1 --calls-per-graph 1 --replays 1 --warmup 1 \
          ${flag:+"$flag"}
      done
    done
  fi
fi

cat "$logs/cli.log" "$logs/bench.log" 2>/dev/null
echo "==== summary"
cat "$summary"
