// The launcher of the Hopper tensor-core kernel (wgmma_kernel.cuh). Built for
// sm_90a alone, where CUTLASS's headers are found.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "dependent_launch.cuh"
#include "gather_linear_kernel.h"
#include "resident_clusters.cuh"
#include "stationary_kernel.cuh"
#include "wgmma_kernel.cuh"

namespace fgl::cuda {
namespace {

static_assert(kWgmmaClusterSplitSizes[0] <= wgmma::kMaxClusterSplits,
              "the cluster split's epilogue holds every block's sums");

// The current device and its multiprocessors: the persistent grids' size.
cudaError_t current_device(int& device, int& sm_count) {
  if (const auto err = cudaGetDevice(&device); err != cudaSuccess) return err;
  return cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount,
                                device);
}

template <typename T, bool kSplit, bool kPingpong, bool kClusterSplit = false,
          bool kTailSplit = false, int kCols = 0, int kPackedHeads = 0>
cudaError_t launch(const GatherLinearParams<T>& p, const WgmmaTail* tail_plan,
                   cudaStream_t stream) {
  using namespace wgmma;
  using Cfg = Config<T, kSplit, kPingpong, kClusterSplit, kTailSplit, kCols,
                     kPackedHeads>;
  using Loaded = typename Cfg::Loaded;
  const auto tma_a = make_tma_atom(
      SM90_TMA_LOAD{}, x_tensor<Loaded, kPackedHeads>(p),
      typename Cfg::SmemLayoutA{}(_, _, 0), typename Cfg::TileA{});
  const auto tma_b = make_tma_atom(
      SM90_TMA_LOAD{}, weight_tensor<Loaded, kPackedHeads>(p),
      typename Cfg::SmemLayoutB{}(_, _, 0), typename Cfg::TileB{});
  int device = 0, sm_count = 0;
  if (const auto err = current_device(device, sm_count); err != cudaSuccess) {
    return err;
  }
  const int64_t tiles =
      (p.B + Cfg::kBM - 1) / Cfg::kBM * ((p.K + Cfg::kBN - 1) / Cfg::kBN);
  const auto start = [&](const auto& tma_c) {
    const auto kernel = gather_linear_wgmma_kernel<
        T, kSplit, kPingpong, kClusterSplit, kTailSplit, kCols, kPackedHeads,
        decltype(tma_a), decltype(tma_b), std::decay_t<decltype(tma_c)>>;
    constexpr int smem_bytes = sizeof(SharedStorage<Cfg>);
    static_assert(smem_bytes <= 227 * 1024, "a multiprocessor's opt-in share");
    if (const auto err = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
        err != cudaSuccess) {
      return err;
    }
    // Persistent: a block (or in the cluster split a cluster of `splits`)
    // a multiprocessor, as many as are resident at once, each taking tiles.
    int splits = 1;
    int64_t groups = sm_count;
    if constexpr (kClusterSplit) {
      ResidentClusters resident{};
      const auto allowed = [](int& bytes) {
        bytes = smem_bytes;
        return cudaSuccess;
      };
      if (const auto err = resident_cluster_counts(kernel, kThreads, device,
                                                   allowed, resident);
          err != cudaSuccess) {
        return err;
      }
      splits = wgmma_cluster_splits(tiles, Cfg::steps(p), resident);
      if (splits < 2) return cudaErrorInvalidValue;
      groups = std::max(resident[splits], 1);
    }
    const auto blocks =
        static_cast<unsigned>(std::min<int64_t>(tiles, groups) * splits);
    Tail<kTailSplit> tail{};
    if constexpr (kTailSplit) {
      // The plan's layout, for this grid and these tiles.
      const tile_schedule::Layout& l = tail_plan->layout;
      if (!tile_schedule::cuts_tail_of(l, tiles, Cfg::steps(p),
                                       static_cast<int>(blocks)) ||
          tail_plan->workspace == nullptr ||
          tail_plan->workspace_bytes <
              tile_schedule::workspace_bytes(l, Cfg::kBM * Cfg::kBN)) {
        return cudaErrorInvalidValue;
      }
      tail.layout = l;
      tail.counts = static_cast<int*>(tail_plan->workspace);
      tail.sums =
          reinterpret_cast<float*>(static_cast<char*>(tail_plan->workspace) +
                                   tile_schedule::counts_bytes(l));
      if (const auto err = cudaMemsetAsync(
              tail.counts, 0, tile_schedule::counts_bytes(l), stream);
          err != cudaSuccess) {
        return err;
      }
    }
    return launch_dependent(kernel, dim3(blocks), dim3(kThreads), smem_bytes,
                            stream, static_cast<unsigned>(splits), tma_a, tma_b,
                            tma_c, p, tail);
  };
  // The cluster split stores from its sums, never through the copy engine.
  if constexpr (!kClusterSplit) {
    if (out_tma_ok(p)) {
      return start(make_tma_atom(SM90_TMA_STORE{}, out_tensor(p),
                                 typename Cfg::SmemLayoutC{},
                                 typename Cfg::TileC{}));
    }
    // float32's three products hold more live registers; their row-store
    // instance spills, and the pair stores are faster there (NOTES v62).
    if constexpr (!kSplit) {
      if (p.out_stride_k == 1) return start(RowStores{});
    }
  }
  return start(NoTmaStore{});
}

// The stationary weight in registers (stationary_kernel.cuh).
template <typename T>
cudaError_t launch_stationary(const GatherLinearParams<T>& p,
                              cudaStream_t stream) {
  using namespace wgmma;
  using namespace wgmma::stationary;
  using L = Layouts<T>;
  const auto tma_x =
      make_tma_atom(SM90_TMA_LOAD{}, x_tensor<typename L::Element>(p),
                    typename L::SmemRing{}(_, _, 0), typename L::TileX{});
  const auto tma_w =
      make_tma_atom(SM90_TMA_LOAD{}, weight_tensor<typename L::Element>(p),
                    typename L::SmemRing{}(_, _, 0), typename L::TileW{});
  int device = 0, sm_count = 0;
  if (const auto err = current_device(device, sm_count); err != cudaSuccess) {
    return err;
  }
  const int64_t n_tiles = (p.K + kCols - 1) / kCols;
  const int64_t tiles = (p.B + kRows - 1) / kRows * n_tiles;
  if (n_tiles > sm_count || (p.H + kStepC - 1) / kStepC * p.R > kMaxSteps) {
    return cudaErrorInvalidValue;  // kernel_choice.h routes neither here
  }
  const auto start = [&](const auto& tma_out) {
    const auto kernel =
        gather_linear_stationary_kernel<T, decltype(tma_x), decltype(tma_w),
                                        std::decay_t<decltype(tma_out)>>;
    if (const auto err = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        err != cudaSuccess) {
      return err;
    }
    // Blocks in whole rows of column tiles: each keeps one.
    int64_t resident = std::min<int64_t>(tiles, sm_count);
    resident -= resident % n_tiles;
    return launch_dependent(
        kernel, dim3(static_cast<unsigned>(resident)),
        dim3(stationary::kThreads), kSmemBytes, stream, 1, tma_x, tma_w,
        tma_out, p, wgmma_stationary_asks_l2_first(resident, tiles, sm_count));
  };
  if (out_tma_ok(p)) {
    return start(make_tma_atom(SM90_TMA_STORE{}, out_tensor(p),
                               typename L::SmemOut{}, typename L::TileOut{}));
  }
  return start(NoTmaStore{});
}

// Shared tiles dealt whole, heads of H packed a step
// (kWgmmaPackedHeadBytes): one pass in the half types, float32's three
// products.
template <typename T>
cudaError_t launch_packed(const GatherLinearParams<T>& p, cudaStream_t stream) {
  static_assert(
      kWgmmaPackedHeadBytes.size() == 3 && kWgmmaPackedHeadBytes[0] == 16 &&
          kWgmmaPackedHeadBytes[1] == 32 && kWgmmaPackedHeadBytes[2] == 64,
      "an instance a width");
  constexpr bool kSplit = std::is_same_v<T, float>;
  constexpr int kE = sizeof(T);
  switch (p.H * kE) {
    case 16:
      return launch<T, kSplit, false, false, false, 0, 16 / kE>(p, nullptr,
                                                                stream);
    case 32:
      return launch<T, kSplit, false, false, false, 0, 32 / kE>(p, nullptr,
                                                                stream);
    case 64:
      return launch<T, kSplit, false, false, false, 0, 64 / kE>(p, nullptr,
                                                                stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// One pass over shared tiles dealt whole (half types, TF32), `cols` output
// columns wide (0: the schedule's own).
template <typename T>
cudaError_t launch_fitted(const GatherLinearParams<T>& p, int cols,
                          cudaStream_t stream) {
  switch (cols) {
    case 0:
    case 256:
      return launch<T, false, false>(p, nullptr, stream);
    case 192:
      return launch<T, false, false, false, false, 192>(p, nullptr, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

template <typename T>
cudaError_t launch_wgmma(const GatherLinearParams<T>& p, Route route,
                         bool tf32_allowed, const WgmmaTail* tail,
                         int tile_cols, cudaStream_t stream) {
  if ((tail != nullptr || tile_cols != 0) && route != Route::kWgmma) {
    return cudaErrorInvalidValue;
  }
  const bool split = std::is_same_v<T, float> && !tf32_allowed;
  // The tail split is the three products', narrower tiles one pass's.
  if (tail != nullptr ? !split : split && tile_cols != 0) {
    return cudaErrorNotSupported;
  }
  if (route == Route::kWgmmaPacked) {
    // float32's one TF32 pass has no packed instance.
    if (std::is_same_v<T, float> && !split) return cudaErrorNotSupported;
    return launch_packed(p, stream);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (route != Route::kWgmma) return cudaErrorNotSupported;
    if (split) {
      return tail != nullptr
                 ? launch<float, true, false, false, true>(p, tail, stream)
                 : launch<float, true, false>(p, nullptr, stream);
    }
    return launch_fitted(p, tile_cols, stream);
  } else {
    if (route == Route::kWgmmaPingpong) {
      return launch<T, false, true>(p, nullptr, stream);
    }
    if (route == Route::kWgmmaSplit) {
      return launch<T, false, false, true>(p, nullptr, stream);
    }
    if (route == Route::kWgmmaStationary) {
      return launch_stationary<T>(p, stream);
    }
    return launch_fitted(p, tile_cols, stream);
  }
}

template cudaError_t launch_wgmma<float>(const GatherLinearParams<float>&,
                                         Route, bool, const WgmmaTail*, int,
                                         cudaStream_t);
template cudaError_t launch_wgmma<__half>(const GatherLinearParams<__half>&,
                                          Route, bool, const WgmmaTail*, int,
                                          cudaStream_t);
template cudaError_t launch_wgmma<__nv_bfloat16>(
    const GatherLinearParams<__nv_bfloat16>&, Route, bool, const WgmmaTail*,
    int, cudaStream_t);

}  // namespace fgl::cuda
