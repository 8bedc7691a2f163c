// Torch-free launchers of fgl::gather_linear's CUDA kernels. The torch-facing
// side (gather_linear_cuda.cpp) validates, allocates, picks the stream and
// the route (kernel_choice.h); this side only sees raw pointers, sizes and
// strides (GatherLinearParams, shared with the CPU kernel).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gather_linear_params.h"
#include "kernel_choice.h"

namespace fgl::cuda {

// T is float, double, __half or __nv_bfloat16; half types accumulate in
// float32, double in double. The launchers require B > 0 and K > 0 and
// return the launch's error (cudaSuccess when it was enqueued).

/// Enqueues the small-problem kernel on `stream`, laid out by `plan`, which
/// must be plan_warp_dot() of this problem.
template <typename T>
cudaError_t launch_warp_dot(const GatherLinearParams<T>& params,
                            const WarpDotPlan& plan, cudaStream_t stream);

/// Enqueues the 16-bit decode kernel on `stream`, laid out by `plan`, which
/// must be plan_warp_mma() of this problem; T is __half, __nv_bfloat16 or
/// float (3xTF32).
template <typename T>
cudaError_t launch_warp_mma(const GatherLinearParams<T>& params,
                            const WarpMmaPlan& plan, cudaStream_t stream);

/// Enqueues the weight-streaming kernel on `stream`, laid out by `plan`,
/// which must be plan_stream() of this problem; `x_vectors` as in Problem.
template <typename T>
cudaError_t launch_stream(const GatherLinearParams<T>& params,
                          const StreamPlan& plan, bool x_vectors,
                          cudaStream_t stream);

/// Clusters of each size of the weight-streaming kernel's blocks, one a
/// multiprocessor, that `device` holds at once (Problem::stream_clusters);
/// asked once a device.
cudaError_t stream_resident_clusters(int device, ResidentClusters& counts);

/// The peak bandwidth of `device`'s memory in GB/s, 0 where not known
/// (Problem::memory_gbps); asked once a device.
int64_t memory_gbps(int device);

/// Enqueues the general tiled kernel on `stream`: any strides, K up to
/// max_tiled_k(); R*H may be 0 (out is then the bias).
template <typename T>
cudaError_t launch_tiled(const GatherLinearParams<T>& params,
                         cudaStream_t stream);

/// The tail split of a Hopper tensor-core launch (tile_schedule.h): the
/// plan's layout (WgmmaTailPlan) and its workspace of the plan's
/// workspace_bytes, which nothing else uses until the launch is done. The
/// launch refuses a layout that does not cut its grid's tail
/// (tile_schedule::cuts_tail_of) or a smaller workspace.
struct WgmmaTail {
  tile_schedule::Layout layout;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

/// Enqueues the Hopper tensor-core kernel (wgmma_kernel.cuh, and
/// stationary_kernel.cuh for kWgmmaStationary; sm_90a, built where CUTLASS
/// is found) on `stream`; T is __half,
/// __nv_bfloat16 or float (one TF32 pass where `tf32_allowed`, else three
/// TF32 products at float32 accuracy) and the problem passes
/// can_run_wgmma(). `route`: kWgmma, or one of its schedules for __half and
/// __nv_bfloat16, kWgmmaPingpong (can_run_wgmma_pingpong()), kWgmmaSplit
/// (can_run_wgmma_split()) or kWgmmaStationary
/// (can_run_wgmma_stationary()); or kWgmmaPacked (can_run_wgmma_packed():
/// half types, float32's three products). `tail` (kWgmma's three products
/// only): plan_wgmma_tail()'s, with its workspace, or nullptr (every tile
/// whole). `tile_cols` (kWgmma's one pass only, half types or TF32, without a
/// tail): RouteChoice::wgmma_tile_cols, 0 for the instance's own tiles.
template <typename T>
cudaError_t launch_wgmma(const GatherLinearParams<T>& params, Route route,
                         bool tf32_allowed, const WgmmaTail* tail,
                         int tile_cols, cudaStream_t stream);

/// The largest K one tiled launch covers (its grid's y dimension is K tiles).
int64_t max_tiled_k();

}  // namespace fgl::cuda
