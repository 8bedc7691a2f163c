// How many thread-block clusters of a kernel a GPU holds at once: clusters
// stay within one group of multiprocessors, so fewer fit than the
// multiprocessors alone suggest, and a cluster split that outnumbers them
// runs in waves.
#pragma once

#include <cuda_runtime.h>

#include "asked_once_a_device.h"
#include "kernel_choice.h"

namespace fgl::cuda {

// Clusters of `size` blocks of `threads` threads and `smem_bytes` of dynamic
// shared memory (already allowed to `kernel`) resident at once.
template <typename Kernel>
cudaError_t resident_clusters(Kernel kernel, unsigned threads, unsigned size,
                              int smem_bytes, int& clusters) {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = size;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(size);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem_bytes;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
}

// The same for every cluster size up to the portable one, on `device`,
// asked once a device and kernel type: the launches that follow pay nothing
// for it. `prepare(smem_bytes)` runs only then, to allow the kernel its
// shared memory and say how much.
template <typename Kernel, typename Prepare>
cudaError_t resident_cluster_counts(Kernel kernel, unsigned threads, int device,
                                    Prepare prepare, ResidentClusters& counts) {
  const auto ask = [&](ResidentClusters& into) {
    into = {};
    int smem_bytes = 0;
    if (const auto err = prepare(smem_bytes); err != cudaSuccess) return err;
    for (unsigned size = 1; size < into.size(); ++size) {
      if (const auto err =
              resident_clusters(kernel, threads, size, smem_bytes, into[size]);
          err != cudaSuccess) {
        return err;
      }
    }
    return cudaSuccess;
  };
  struct Answer {
    ResidentClusters counts{};
    cudaError_t error = cudaSuccess;
  };
  const Answer answer = asked_once_a_device(device, [&] {
    Answer fresh;
    fresh.error = ask(fresh.counts);
    return fresh;
  });
  counts = answer.counts;
  return answer.error;
}

}  // namespace fgl::cuda
