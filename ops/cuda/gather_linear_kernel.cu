// The launchers of fgl::gather_linear's CUDA kernels: the streaming launcher
// picks a kernel by element type and rows of B; both are instantiated for
// every element type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gather_linear_kernel.h"
#include "mma_streaming_kernel.cuh"
#include "streaming_kernel.cuh"
#include "tiled_kernel.cuh"

namespace fgl::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T, int kRows, int kCols>
void launch_simt_streaming(const GatherLinearParams<T>& p,
                           cudaStream_t stream) {
  // grid.x: groups of kWarps * kCols output columns; grid.y: kRows-row blocks
  // of B. Block: kWarps warps, one per kCols columns.
  const dim3 grid(
      static_cast<unsigned>(ceil_div(p.K, streaming::kWarps * kCols)),
      static_cast<unsigned>(ceil_div(p.B, kRows)));
  streaming::gather_linear_streaming_kernel<T, kRows, kCols>
      <<<grid, streaming::kThreads, 0, stream>>>(p);
}

template <typename T, int kTiles>
void launch_mma_streaming(const GatherLinearParams<T>& p, cudaStream_t stream) {
  // grid.x: blocks of 16 output columns; grid.y: 8 * kTiles-row blocks of B.
  // Block: 8 warps splitting the contraction.
  const dim3 grid(static_cast<unsigned>(ceil_div(p.K, mma_streaming::kColumns)),
                  static_cast<unsigned>(ceil_div(p.B, 8 * kTiles)));
  mma_streaming::gather_linear_mma_streaming_kernel<T, kTiles>
      <<<grid, mma_streaming::kThreads, 0, stream>>>(p);
}

}  // namespace

template <typename T>
bool try_launch_streaming(const GatherLinearParams<T>& p, cudaStream_t stream) {
  if (p.B > kMaxStreamingRows || !streaming::can_run(p)) return false;
  if constexpr (sizeof(T) == 2) {  // float16, bfloat16: tensor cores
    if (p.B <= 8) {
      launch_mma_streaming<T, 1>(p, stream);
    } else {
      launch_mma_streaming<T, 2>(p, stream);
    }
  } else if (p.B == 1) {
    launch_simt_streaming<T, 1, 4>(p, stream);
  } else if (p.B <= 4) {
    launch_simt_streaming<T, 4, 4>(p, stream);
  } else {
    launch_simt_streaming<T, 16, 2>(p, stream);
  }
  return true;
}

template <typename T>
void launch_tiled(const GatherLinearParams<T>& p, cudaStream_t stream) {
  // grid.x: B tiles (up to 2^31 - 1), grid.y: K tiles (up to 65535).
  const dim3 grid(static_cast<unsigned>(ceil_div(p.B, tiled::kBM)),
                  static_cast<unsigned>(ceil_div(p.K, tiled::kBN)));
  tiled::gather_linear_tiled_kernel<T><<<grid, tiled::kThreads, 0, stream>>>(p);
}

int64_t max_tiled_k() { return int64_t{65535} * tiled::kBN; }

#define FGL_INSTANTIATE(T)                                            \
  template bool try_launch_streaming<T>(const GatherLinearParams<T>&, \
                                        cudaStream_t);                \
  template void launch_tiled<T>(const GatherLinearParams<T>&, cudaStream_t);
FGL_INSTANTIATE(float)
FGL_INSTANTIATE(double)
FGL_INSTANTIATE(__half)
FGL_INSTANTIATE(__nv_bfloat16)
#undef FGL_INSTANTIATE

}  // namespace fgl::cuda
