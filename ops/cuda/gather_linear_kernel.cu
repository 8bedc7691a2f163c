// The launchers of fgl::gather_linear's CUDA kernels, instantiated for every
// element type.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "asked_once_a_device.h"
#include "dependent_launch.cuh"
#include "gather_linear_kernel.h"
#include "resident_clusters.cuh"
#include "stream_kernel.cuh"
#include "tiled_kernel.cuh"
#include "warp_dot_kernel.cuh"
#include "warp_mma_kernel.cuh"

namespace fgl::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
constexpr CUtensorMapDataType tensor_map_type() {
  if constexpr (std::is_same_v<T, float>)
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if constexpr (std::is_same_v<T, double>)
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
  if constexpr (std::is_same_v<T, __half>)
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// The driver's tensor-map encoder, looked up once through the runtime (no
// link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// The weight [K, C] as the copy engine sees it: boxes of kCols rows by
// copy_stages 128-byte stages, swizzled so that ldmatrix reads them without
// bank conflicts; rows past K arrive as zeros. One stage a box: dims (C, K),
// columns past C arriving as zeros. Several: dims (stage columns, K,
// stages), the weight's 128-byte stages as a third dimension, so that a box
// lands as that many [kCols][kStageBytes] tiles back to back (C a multiple
// of a stage, plan_stream); stages past C arrive as zeros.
template <typename T>
cudaError_t encode_weight_map(const GatherLinearParams<T>& p, int copy_stages,
                              CUtensorMap* map) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  constexpr int64_t kStageC = stream::kStageBytes / sizeof(T);
  const int64_t C = p.R * p.H;
  const bool by_stage = copy_stages > 1;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(by_stage ? kStageC : C),
                              static_cast<cuuint64_t>(p.K),
                              static_cast<cuuint64_t>(C / kStageC)};
  const cuuint64_t strides[2] = {
      static_cast<cuuint64_t>(p.weight_stride_k) * sizeof(T),
      stream::kStageBytes};
  const cuuint32_t box[3] = {kStageC, stream::kCols,
                             static_cast<cuuint32_t>(copy_stages)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult status = encode(
      map, tensor_map_type<T>(), by_stage ? 3 : 2, const_cast<T*>(p.weight),
      dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return status == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// x (R, B, H) as the copy engine sees it, dims (H, B, R): boxes of one
// 128-byte stage of kRows rows of one head, swizzled like the weight's;
// rows past B arrive as zeros.
template <typename T, int kRows>
cudaError_t encode_x_map(const GatherLinearParams<T>& p, CUtensorMap* map) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(p.H),
                              static_cast<cuuint64_t>(p.B),
                              static_cast<cuuint64_t>(p.R)};
  const cuuint64_t strides[2] = {
      static_cast<cuuint64_t>(p.x_stride_b) * sizeof(T),
      static_cast<cuuint64_t>(p.x_stride_r) * sizeof(T)};
  const cuuint32_t box[3] = {stream::kStageBytes / sizeof(T), kRows, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult status =
      encode(map, tensor_map_type<T>(), 3, const_cast<T*>(p.x), dims, strides,
             box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return status == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <typename T, int kRows, int kCopy>
cudaError_t launch_stream_copies(const GatherLinearParams<T>& p,
                                 const StreamPlan& plan, bool x_vectors,
                                 cudaStream_t stream) {
  CUtensorMap map;
  if (const auto err = encode_weight_map(p, kCopy, &map); err != cudaSuccess) {
    return err;
  }
  CUtensorMap x_map{};  // unread without x_in_ring
  if (plan.x_in_ring) {
    if (const auto err = encode_x_map<T, kRows>(p, &x_map);
        err != cudaSuccess) {
      return err;
    }
  }
  const auto kernel = stream::gather_linear_stream_kernel<T, kRows, kCopy>;
  if (const auto err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          static_cast<int>(plan.smem_bytes));
      err != cudaSuccess) {
    return err;
  }
  const stream::Layout layout{plan.stages_per_split,
                              plan.slab_pitch,
                              plan.ring_stages,
                              x_vectors,
                              plan.x_in_ring,
                              plan.prefetch_stages,
                              plan.next_grid_after_last_copy};
  // grid.x: the contraction's splits, one cluster; grid.y: 64-column tiles
  // of K; grid.z: kRows-row tiles of B. Block: the consumer groups' warps,
  // one producer warp and, where x is split in the ring, the splitter warps.
  const dim3 grid(static_cast<unsigned>(plan.splits),
                  static_cast<unsigned>(plan.column_tiles),
                  static_cast<unsigned>(plan.row_tiles));
  const dim3 block(stream::block_threads(sizeof(T), kRows));
  return launch_dependent(
      kernel, grid, block, static_cast<size_t>(plan.smem_bytes), stream,
      static_cast<unsigned>(plan.splits), map, x_map, p, layout);
}

// The instances of plan.vector_bytes: 16-byte vectors or one element.
template <typename T, int kRows>
cudaError_t launch_warp_dot_rows(const GatherLinearParams<T>& p,
                                 const WarpDotPlan& plan, cudaStream_t stream) {
  constexpr int kElement = static_cast<int>(sizeof(T));
  const dim3 grid(static_cast<unsigned>(plan.column_tiles),
                  static_cast<unsigned>(plan.row_tiles));
  const warp_dot::Layout layout{plan.splits, static_cast<int32_t>(plan.slice)};
  if (plan.vector_bytes == warp_dot::kVectorBytes) {
    return launch_dependent(
        warp_dot::gather_linear_warp_dot_kernel<T, kRows,
                                                warp_dot::kVectorBytes>,
        grid, dim3(plan.threads), 0, stream, 1, p, layout);
  }
  if (plan.vector_bytes != kElement) return cudaErrorInvalidValue;
  return launch_dependent(
      warp_dot::gather_linear_warp_dot_kernel<T, kRows, kElement>, grid,
      dim3(plan.threads), 0, stream, 1, p, layout);
}

// The instances of plan.copy_stages: one stage a copy, or copy_stages of
// the type and rows.
template <typename T, int kRows>
cudaError_t launch_stream_rows(const GatherLinearParams<T>& p,
                               const StreamPlan& plan, bool x_vectors,
                               cudaStream_t stream) {
  constexpr int kCopy = stream::copy_stages(sizeof(T), kRows);
  if constexpr (kCopy > 1) {
    if (plan.copy_stages == kCopy) {
      return launch_stream_copies<T, kRows, kCopy>(p, plan, x_vectors, stream);
    }
  }
  if (plan.copy_stages != 1) return cudaErrorInvalidValue;
  return launch_stream_copies<T, kRows, 1>(p, plan, x_vectors, stream);
}

template <typename T, int kRowTiles>
cudaError_t launch_warp_mma_rows(const GatherLinearParams<T>& p,
                                 const WarpMmaPlan& plan, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.column_tiles),
                  static_cast<unsigned>(plan.row_tiles));
  const warp_mma::Layout layout{plan.splits, static_cast<int32_t>(plan.slice),
                                plan.prefetch_first_step};
  return launch_dependent(warp_mma::gather_linear_warp_mma_kernel<T, kRowTiles>,
                          grid, dim3(plan.threads), 0, stream, 1, p, layout);
}

}  // namespace

template <typename T>
cudaError_t launch_warp_mma(const GatherLinearParams<T>& p,
                            const WarpMmaPlan& plan, cudaStream_t stream) {
  // The instances plan_warp_mma chooses from (warp_mma::row_tiles_per_warp).
  switch (plan.row_tiles_per_warp) {
    case 1:
      return launch_warp_mma_rows<T, 1>(p, plan, stream);
    case 2:
      return launch_warp_mma_rows<T, 2>(p, plan, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_warp_dot(const GatherLinearParams<T>& p,
                            const WarpDotPlan& plan, cudaStream_t stream) {
  // The instances plan_warp_dot chooses from (warp_dot::rows_per_warp).
  switch (plan.rows_per_warp) {
    case 1:
      return launch_warp_dot_rows<T, 1>(p, plan, stream);
    case 2:
      return launch_warp_dot_rows<T, 2>(p, plan, stream);
    case 4:
      return launch_warp_dot_rows<T, 4>(p, plan, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_stream(const GatherLinearParams<T>& p,
                          const StreamPlan& plan, bool x_vectors,
                          cudaStream_t stream) {
  // The instances plan_stream chooses from (rows_per_block there).
  switch (plan.rows_per_block) {
    case 4:
      if constexpr (sizeof(T) != 2) {
        return launch_stream_rows<T, 4>(p, plan, x_vectors, stream);
      }
      break;
    case 8:
      return launch_stream_rows<T, 8>(p, plan, x_vectors, stream);
    case 16:
      if constexpr (sizeof(T) != 8) {
        return launch_stream_rows<T, 16>(p, plan, x_vectors, stream);
      }
      break;
    case 32:
      if constexpr (sizeof(T) != 8) {
        return launch_stream_rows<T, 32>(p, plan, x_vectors, stream);
      }
      break;
  }
  return cudaErrorInvalidValue;
}

cudaError_t stream_resident_clusters(int device, ResidentClusters& counts) {
  // Any instance at the whole shared memory: one block a multiprocessor.
  const auto kernel = stream::gather_linear_stream_kernel<float, 32, 1>;
  const auto whole_smem = [&](int& smem_bytes) {
    if (const auto err = cudaDeviceGetAttribute(
            &smem_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
        err != cudaSuccess) {
      return err;
    }
    return cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  };
  return resident_cluster_counts(kernel, stream::block_threads(4, 32), device,
                                 whole_smem, counts);
}

int64_t memory_gbps(int device) {
  return asked_once_a_device(device, [device] {
    int khz = 0;
    int bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth,
                               device) != cudaSuccess) {
      return int64_t{0};
    }
    // Two transfers a clock (double data rate) over the bus.
    return int64_t{khz} * 2 * (bits / 8) / 1000000;
  });
}

template <typename T>
cudaError_t launch_tiled(const GatherLinearParams<T>& p, cudaStream_t stream) {
  // grid.x: B tiles (up to 2^31 - 1), grid.y: K tiles (up to 65535).
  const dim3 grid(static_cast<unsigned>(ceil_div(p.B, tiled::kBM)),
                  static_cast<unsigned>(ceil_div(p.K, tiled::kBN)));
  return launch_dependent(tiled::gather_linear_tiled_kernel<T>, grid,
                          dim3(tiled::kThreads), 0, stream, 1, p);
}

int64_t max_tiled_k() { return int64_t{65535} * tiled::kBN; }

#define FGL_INSTANTIATE(T)                                                   \
  template cudaError_t launch_warp_dot<T>(const GatherLinearParams<T>&,      \
                                          const WarpDotPlan&, cudaStream_t); \
  template cudaError_t launch_stream<T>(                                     \
      const GatherLinearParams<T>&, const StreamPlan&, bool, cudaStream_t);  \
  template cudaError_t launch_tiled<T>(const GatherLinearParams<T>&,         \
                                       cudaStream_t);
FGL_INSTANTIATE(float)
FGL_INSTANTIATE(double)
FGL_INSTANTIATE(__half)
FGL_INSTANTIATE(__nv_bfloat16)
#undef FGL_INSTANTIATE
template cudaError_t launch_warp_mma<float>(const GatherLinearParams<float>&,
                                            const WarpMmaPlan&, cudaStream_t);
template cudaError_t launch_warp_mma<__half>(const GatherLinearParams<__half>&,
                                             const WarpMmaPlan&, cudaStream_t);
template cudaError_t launch_warp_mma<__nv_bfloat16>(
    const GatherLinearParams<__nv_bfloat16>&, const WarpMmaPlan&, cudaStream_t);

}  // namespace fgl::cuda
