// The launcher of the Hopper tensor-core kernel (wgmma_kernel.cuh). Built for
// sm_90a alone, where CUTLASS's headers are found.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "dependent_launch.cuh"
#include "gather_linear_kernel.h"
#include "wgmma_kernel.cuh"

namespace fgl::cuda {
namespace {

template <typename T, bool kSplit, bool kPingpong>
cudaError_t launch(const GatherLinearParams<T>& p, cudaStream_t stream) {
  using namespace wgmma;
  using Cfg = Config<T, kSplit, kPingpong>;
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
  const int64_t tiles =
      (p.B + Cfg::kBM - 1) / Cfg::kBM * ((p.K + Cfg::kBN - 1) / Cfg::kBN);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(tiles, sm_count));
  const auto start = [&](const auto& tma_c) {
    const auto kernel =
        gather_linear_wgmma_kernel<T, kSplit, kPingpong, decltype(tma_a),
                                   decltype(tma_b),
                                   std::decay_t<decltype(tma_c)>>;
    constexpr int smem_bytes = sizeof(SharedStorage<Cfg>);
    if (const auto err = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
        err != cudaSuccess) {
      return err;
    }
    return launch_dependent(kernel, dim3(blocks), dim3(kThreads), smem_bytes,
                            stream, 1, tma_a, tma_b, tma_c, p);
  };
  if (out_tma_ok(p)) {
    return start(make_tma_atom(SM90_TMA_STORE{}, out_tensor(p),
                               typename Cfg::SmemLayoutC{},
                               typename Cfg::TileC{}));
  }
  return start(NoTmaStore{});
}

}  // namespace

template <typename T>
cudaError_t launch_wgmma(const GatherLinearParams<T>& p, bool pingpong,
                         bool tf32_allowed, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    if (pingpong) return cudaErrorNotSupported;
    if (!tf32_allowed) return launch<T, true, false>(p, stream);
    return launch<T, false, false>(p, stream);
  } else {
    if (pingpong) return launch<T, false, true>(p, stream);
    return launch<T, false, false>(p, stream);
  }
}

template cudaError_t launch_wgmma<float>(const GatherLinearParams<float>&, bool,
                                         bool, cudaStream_t);
template cudaError_t launch_wgmma<__half>(const GatherLinearParams<__half>&,
                                          bool, bool, cudaStream_t);
template cudaError_t launch_wgmma<__nv_bfloat16>(
    const GatherLinearParams<__nv_bfloat16>&, bool, bool, cudaStream_t);

}  // namespace fgl::cuda
