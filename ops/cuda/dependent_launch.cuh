// Kernel launches of the fused kernels as programmatic dependent launches
// (sm_90 on): a grid may start while the grid before it on the stream
// finishes, so that its launch and set-up overlap that grid's tail. Each
// fused kernel calls ptx::await_previous_grid() before it touches global
// memory, so stream order is kept.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace fgl::cuda {

/// Whether the current device starts grids early on request (sm_90 on).
inline bool dependent_launch_supported() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                device) == cudaSuccess &&
         major >= 9;
}

/// Enqueues kernel<<<grid, block, smem_bytes, stream>>>(args...) as a
/// dependent launch where the device has it; `cluster_x` > 1 groups the
/// blocks along x into thread-block clusters of that many.
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block,
                             size_t smem_bytes, cudaStream_t stream,
                             unsigned cluster_x, Args&&... args) {
  cudaLaunchAttribute attrs[2]{};
  unsigned count = 0;
  if (cluster_x > 1) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count].val.clusterDim.x = cluster_x;
    attrs[count].val.clusterDim.y = 1;
    attrs[count].val.clusterDim.z = 1;
    ++count;
  }
  if (dependent_launch_supported()) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace fgl::cuda
