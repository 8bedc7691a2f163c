#include "kernel_choice.h"

#include <algorithm>
#include <atomic>

#include "stream_layout.h"

namespace fgl::cuda {
namespace {

// The architecture the streaming kernel was built and measured for.
constexpr int kStreamArch = 90;
// Rows of B up to which the streaming kernel beat cat + cuBLAS in every
// measured problem on the H200 (bench/NOTES.md, "CUDA routing"): 16 in
// float16/bfloat16, 64 in float32. float64 was not measured: cuBLAS keeps it.
constexpr int64_t kMaxStreamRowsHalf = 16;
constexpr int64_t kMaxStreamRowsFloat = 64;
// Below this many weight bytes the kernel lost to cat + cuBLAS in float32:
// too little weight to stream for its fixed costs (the 4,12,32,56 problem).
constexpr int64_t kMinFloatWeightBytes = 1 << 20;
// The weight ring's depth: at most kMaxRingStages, and at least
// kMinRingStages beside the x slab (fewer leave too few bytes in flight).
constexpr int kMaxRingStages = 16;
constexpr int kMinRingStages = 4;
// A cluster's reduction costs about as much as streaming this many stages.
constexpr int64_t kClusterCostStages = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows of B per block: the kernel's instances by element size. The tensor
// cores take n8 tiles (float16, bfloat16, float32); the CUDA cores hold
// kRows x 4 accumulators per lane (float64, and float32 below 8 rows, where
// the tensor cores would mostly multiply zeros).
int rows_per_block(int element_size, int64_t B) {
  switch (element_size) {
    case 2:
      return B <= 8 ? 8 : B <= 16 ? 16 : 32;
    case 4:
      return B <= 4 ? 4 : B <= 8 ? 8 : B <= 16 ? 16 : 32;
    default:
      return B <= 4 ? 4 : 8;
  }
}

std::atomic<int> g_forced_route{-1};

}  // namespace

const char* route_name(Route route) {
  switch (route) {
    case Route::kStream:
      return "stream";
    case Route::kTiled:
      return "tiled";
    case Route::kCublasView:
      return "cublas-view";
    case Route::kCublasCat:
      return "cublas-cat";
  }
  return "?";
}

std::optional<StreamPlan> plan_stream(const Problem& p) {
  const int64_t C = p.R * p.H;
  if (p.arch != kStreamArch || !p.weight_tma_ok || C <= 0 || p.B <= 0 ||
      p.K <= 0 || p.sm_count <= 0 || C > INT32_MAX || p.K > INT32_MAX) {
    return std::nullopt;
  }
  const int e = p.element_size;
  const int acc_size = e == 8 ? 8 : 4;
  const int64_t stage_c = stream::kStageBytes / e;
  const int64_t total_stages = ceil_div(C, stage_c);
  StreamPlan best;
  best.rows_per_block = rows_per_block(e, p.B);
  best.column_tiles = ceil_div(p.K, stream::kCols);
  best.row_tiles = ceil_div(p.B, best.rows_per_block);
  if (best.column_tiles > 65535 || best.row_tiles > 65535) return std::nullopt;
  // Shared memory of a multiprocessor: the per-block limit plus the 1 KB the
  // hardware reserves per block.
  const int64_t sm_smem = p.max_smem_per_block + 1024;
  const int groups = stream::consumer_groups(e, best.rows_per_block);
  int64_t best_cost = INT64_MAX;
  for (int splits = 1; splits <= stream::kMaxClusterSplits; ++splits) {
    const int64_t per_split = ceil_div(total_stages, splits);
    if (splits > 1 && (splits - 1) * per_split >= total_stages) continue;
    // 16 bytes of padding per slab row keep ldmatrix free of bank conflicts.
    const int64_t pitch = per_split * stage_c + 16 / e;
    const int64_t blocks = best.column_tiles * best.row_tiles * splits;
    const int64_t fixed =
        stream::smem_bytes(0, best.rows_per_block, pitch, e, acc_size);
    const auto ring_within = [&](int64_t budget) {
      return std::min<int64_t>(
          {kMaxRingStages, per_split,
           (budget - fixed) / (stream::kStageTileBytes + 16)});
    };
    // Two blocks per multiprocessor where there are that many blocks and
    // their rings fit; else one block with the whole shared memory.
    int64_t ring = ring_within(p.max_smem_per_block);
    if (blocks > p.sm_count) {
      const int64_t shared = ring_within(sm_smem / 2 - 1024);
      if (shared >= std::min<int64_t>(kMinRingStages, per_split)) ring = shared;
    }
    // The consumer groups take stages in turn: a ring that cycles holds a
    // multiple of them, so that each slot serves one group
    // (stream_kernel.cuh).
    if (ring < per_split) ring -= ring % groups;
    if (ring < std::min<int64_t>(kMinRingStages, per_split)) continue;
    // The busiest multiprocessor streams this many stages.
    const int64_t cost = ceil_div(blocks, p.sm_count) * per_split +
                         (splits > 1 ? kClusterCostStages : 0);
    if (cost < best_cost) {
      best_cost = cost;
      best.splits = splits;
      best.stages_per_split = per_split;
      best.ring_stages = static_cast<int>(ring);
      best.slab_pitch = pitch;
      best.smem_bytes = stream::smem_bytes(
          static_cast<int>(ring), best.rows_per_block, pitch, e, acc_size);
    }
  }
  if (best.splits == 0) return std::nullopt;
  return best;
}

RouteChoice choose(const Problem& p) {
  const Route fallback =
      p.x_gathered_view ? Route::kCublasView : Route::kCublasCat;
  if (const auto forced = forced_route()) {
    if (*forced == Route::kStream) {
      if (auto plan = plan_stream(p)) return {Route::kStream, plan};
    } else if (*forced != Route::kCublasView || p.x_gathered_view) {
      return {*forced, std::nullopt};
    }
  }
  bool stream = false;
  if (p.element_size == 2) {
    stream = p.B <= kMaxStreamRowsHalf;
  } else if (p.element_size == 4) {
    const int64_t weight_bytes = p.K * p.R * p.H * p.element_size;
    stream = p.B <= kMaxStreamRowsFloat && weight_bytes >= kMinFloatWeightBytes;
  }
  // Planned only where the table streams: the call's host-side cost.
  if (stream) {
    if (auto plan = plan_stream(p)) return {Route::kStream, plan};
  }
  return {fallback, std::nullopt};
}

Route choose_route(const Problem& p) { return choose(p).route; }

void force_route(std::optional<Route> route) {
  g_forced_route.store(route ? static_cast<int>(*route) : -1);
}

std::optional<Route> forced_route() {
  const int v = g_forced_route.load();
  if (v < 0) return std::nullopt;
  return static_cast<Route>(v);
}

}  // namespace fgl::cuda
