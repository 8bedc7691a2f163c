// The launcher of the Hopper tensor-core kernel (wgmma_kernel.cuh). Built for
// sm_90a alone, where CUTLASS's headers are found.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "dependent_launch.cuh"
#include "gather_linear_kernel.h"
#include "resident_clusters.cuh"
#include "wgmma_kernel.cuh"

namespace fgl::cuda {
namespace {

template <typename T, bool kSplit, bool kPingpong, bool kClusterSplit = false,
          bool kStationary = false>
cudaError_t launch(const GatherLinearParams<T>& p, cudaStream_t stream) {
  using namespace wgmma;
  using Cfg = Config<T, kSplit, kPingpong, kClusterSplit, kStationary>;
  using Loaded = typename Cfg::Loaded;
  const auto tma_a = make_tma_atom(SM90_TMA_LOAD{}, x_tensor<Loaded>(p),
                                   typename Cfg::SmemLayoutA{}(_, _, 0),
                                   typename Cfg::TileA{});
  const auto tma_b = make_tma_atom(SM90_TMA_LOAD{}, weight_tensor<Loaded>(p),
                                   typename Cfg::SmemLayoutB{}(_, _, 0),
                                   typename Cfg::TileB{});
  int device = 0, sm_count = 0;
  if (const auto err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (const auto err = cudaDeviceGetAttribute(
          &sm_count, cudaDevAttrMultiProcessorCount, device);
      err != cudaSuccess) {
    return err;
  }
  const int64_t n_tiles = (p.K + Cfg::kBN - 1) / Cfg::kBN;
  const int64_t tiles = (p.B + Cfg::kBM - 1) / Cfg::kBM * n_tiles;
  if (kStationary &&
      (n_tiles > sm_count ||
       (p.H + Cfg::kBK - 1) / Cfg::kBK * p.R > Cfg::kStationarySteps)) {
    return cudaErrorInvalidValue;  // kernel_choice.h routes neither here
  }
  const auto start = [&](const auto& tma_c) {
    const auto kernel = gather_linear_wgmma_kernel<
        T, kSplit, kPingpong, kClusterSplit, kStationary, decltype(tma_a),
        decltype(tma_b), std::decay_t<decltype(tma_c)>>;
    constexpr int smem_bytes = sizeof(SharedStorage<Cfg>);
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
      splits = wgmma_cluster_splits(
          tiles, (p.H + Cfg::kBK - 1) / Cfg::kBK * p.R, resident);
      if (splits < 2) return cudaErrorInvalidValue;
      groups = std::max(resident[splits], 1);
    }
    int64_t resident = std::min<int64_t>(tiles, groups);
    // The stationary weight: each block keeps one column tile, so blocks
    // come in whole rows of tiles.
    if constexpr (kStationary) resident -= resident % n_tiles;
    const auto blocks = static_cast<unsigned>(resident * splits);
    return launch_dependent(kernel, dim3(blocks), dim3(kThreads), smem_bytes,
                            stream, static_cast<unsigned>(splits), tma_a, tma_b,
                            tma_c, p);
  };
  // The cluster split stores from its sums, never through the copy engine.
  if (!kClusterSplit && out_tma_ok(p)) {
    return start(make_tma_atom(SM90_TMA_STORE{}, out_tensor(p),
                               typename Cfg::SmemLayoutC{},
                               typename Cfg::TileC{}));
  }
  return start(NoTmaStore{});
}

}  // namespace

template <typename T>
cudaError_t launch_wgmma(const GatherLinearParams<T>& p, Route route,
                         bool tf32_allowed, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    if (route != Route::kWgmma) return cudaErrorNotSupported;
    if (!tf32_allowed) return launch<T, true, false>(p, stream);
    return launch<T, false, false>(p, stream);
  } else {
    if (route == Route::kWgmmaPingpong) {
      return launch<T, false, true>(p, stream);
    }
    if (route == Route::kWgmmaSplit) {
      return launch<T, false, false, true>(p, stream);
    }
    if (route == Route::kWgmmaStationary) {
      return launch<T, false, true, false, true>(p, stream);
    }
    return launch<T, false, false>(p, stream);
  }
}

template cudaError_t launch_wgmma<float>(const GatherLinearParams<float>&,
                                         Route, bool, cudaStream_t);
template cudaError_t launch_wgmma<__half>(const GatherLinearParams<__half>&,
                                          Route, bool, cudaStream_t);
template cudaError_t launch_wgmma<__nv_bfloat16>(
    const GatherLinearParams<__nv_bfloat16>&, Route, bool, cudaStream_t);

}  // namespace fgl::cuda
