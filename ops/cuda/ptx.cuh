// Thin wrappers over the instructions the fused kernels use: mbarriers, the
// cluster barrier, stores into a cluster peer's shared memory, bulk tensor
// copies (TMA), cp.async, named barriers, shared-memory vectors, ldmatrix,
// stmatrix, mma.sync and wgmma. Each is one PTX instruction
// (await_previous_grid and cluster_sync_unaligned two); callers
// guard each with the architecture it needs (mma.sync sm_80, most sm_90),
// but for await_previous_grid, a no-op before sm_90, and prefetch_l2 (any).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace fgl::cuda::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// `v`, as a value the compiler cannot see through: what is derived from
// it is computed where it is used, not hoisted and kept live (where
// registers are short, such values spill).
__device__ __forceinline__ int64_t opaque(int64_t v) {
  asm volatile("mov.b64 %0, %0;" : "+l"(v));
  return v;
}

// Waits until the grid before this one on the stream (a dependent launch,
// dependent_launch.cuh) has completed and its writes are visible (at once
// in a grid launched without the attribute). Nothing before it may read
// what that grid may write.
__device__ __forceinline__ void wait_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next grid on the stream start its blocks once every block of this
// one has called this (or exited); one thread's call counts for its block.
// Only ever after wait_previous_grid, so that at most one grid waits behind
// a running one: a trigger before it let each waiting grid start the next, a
// chain of them crowding the running grid's multiprocessors.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The start of every fused kernel: waits for the grid before, then lets the
// next one start.
__device__ __forceinline__ void await_previous_grid() {
  wait_previous_grid();
  launch_dependents();
}

// Asks L2 for the 128-byte line holding `ptr`, without waiting for it.
__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(count)
               : "memory");
}

// Makes initialised mbarriers visible to the copy engine and the cluster.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar))
               : "memory");
}

// Arrives and announces `bytes` that copies will complete on `bar`.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar,
                                                          uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// Blocks until the phase with the given parity of `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (done == 0);
}

// Arrives on the cluster's barrier, releasing this thread's writes to the
// cluster, and waits until every thread of the cluster that has not exited
// has arrived, acquiring theirs (sm_90). Unlike cooperative_groups'
// cluster.sync(), not warp-aligned: a warp's threads may come apart or
// have exited.
__device__ __forceinline__ void cluster_sync_unaligned() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;" ::
          : "memory");
}

// The two halves of a cluster barrier, apart: arrive without ordering
// anything (after fence_barrier_init, the one thing it must publish), and
// wait for every thread of the cluster that has not exited to have
// arrived, acquiring what they released (sm_90).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// The address of `addr` (smem_addr) in the shared memory of the cluster's
// block `rank` (sm_90).
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(addr), "r"(rank));
  return remote;
}

// Stores 16 bytes at `remote` (cluster_map) in another block's shared
// memory and counts them on that block's mbarrier `remote_bar` (sm_90);
// the storing thread does not wait.
__device__ __forceinline__ void st_async_v4(uint32_t remote, uint4 v,
                                            uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], "
      "{%1, %2, %3, %4}, [%5];" ::"r"(remote),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_bar)
      : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// Asks L2 for the box at (c0, c1) of the 2-D tensor `map`, without waiting
// for it.
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap* map,
                                                int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(
          map),
      "r"(c0), "r"(c1)
      : "memory");
}

// Asks L2 for the box at (c0, c1, c2) of the 3-D tensor `map`, without
// waiting for it.
__device__ __forceinline__ void tma_prefetch_3d(const CUtensorMap* map,
                                                int32_t c0, int32_t c1,
                                                int32_t c2) {
  asm volatile(
      "cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];" ::
          "l"(map),
      "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Copies the box at (c0, c1) of the 2-D tensor `map` into shared memory at
// `dst`; completion is counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map,
                                            uint64_t* bar, int32_t c0,
                                            int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// The same for the box at (c0, c1, c2) of a 3-D tensor map.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map,
                                            uint64_t* bar, int32_t c0,
                                            int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Copies 16 bytes from global to shared memory asynchronously, through L2
// only; with src_bytes = 0 it writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src,
                                            uint32_t src_bytes) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)),
      "l"(src), "r"(src_bytes)
      : "memory");
}

// Waits for this thread's cp.async copies.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// Named barrier over `threads` threads (a multiple of 32); id 0 is
// __syncthreads'.
__device__ __forceinline__ void named_barrier_sync(uint32_t id,
                                                   uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Arrives on named barrier `id` without waiting: the threads that sync on
// it wait for these.
__device__ __forceinline__ void named_barrier_arrive(uint32_t id,
                                                     uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// 4, 8 and 16 bytes of shared memory at `addr` (smem_addr), loaded and
// stored.
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v));
}
__device__ __forceinline__ void st_shared_v2(uint32_t addr, uint2 v) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(v.x),
               "r"(v.y));
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// Stores four 8 x 8 matrices of 16-bit values transposed: register q holds
// this thread's mma-fragment pair of matrix q (its row lane / 4, columns
// 2 (lane % 4) and the next), and lane 8 q + c gives the address of the 16
// bytes that column c of matrix q becomes.
__device__ __forceinline__ void stmatrix_x4_trans(const uint32_t (&r)[4],
                                                  uint32_t addr) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, "
      "%4};" ::"r"(addr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}

// D += A * B on the tensor cores, m16n8k16 with float32 accumulators; T is
// __half or __nv_bfloat16 (A row-major 16x16, B column-major 16x8).
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4],
                                             const uint32_t (&a)[4],
                                             uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// D += A * B on the tensor cores, m16n8k8 with TF32 operands (the upper 19
// bits of each float32 register) and float32 accumulators.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4],
                                                 const uint32_t (&a)[4],
                                                 uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Warp-group matrix multiplies (sm_90a: callers guard them with
// __CUDA_ARCH_FEAT_SM90_ALL). A warp group's 4 warps issue each one
// together; it runs asynchronously until wgmma_wait.

// The shared-memory descriptor of a K-major tile stored in 128-byte rows
// swizzled by the copy engine's 128-byte pattern, 8-row atoms 1024 bytes
// apart, the tile on the swizzle's 1024-byte period. Adding n to it moves
// the tile's start 16 n bytes along K within its rows.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr) {
  return (uint64_t{1} << 62) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 16) | ((addr & 0x3ffffu) >> 4);
}

// Orders this thread's register accesses before the warp group's next
// wgmma (its accumulators, its A operand).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most `kPending` committed groups of wgmma are running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accesses to `d` across a wgmma_wait.
template <int kTiles>
__device__ __forceinline__ void wgmma_settle(float (&d)[kTiles][4]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[n][i])::"memory");
  }
}

// Makes this thread's ordinary shared-memory stores visible to the tensor
// cores' and the copy engine's reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

#define FGL_WGMMA_D4(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3])
#define FGL_WGMMA_D8(d) \
  FGL_WGMMA_D4(d), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3])
#define FGL_WGMMA_D16(d)                                                       \
  FGL_WGMMA_D8(d), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
#define FGL_WGMMA_R8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define FGL_WGMMA_R16 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"

// D (64 x 8 kTiles, kTiles 2 or 4) = A (64 x 8, TF32 in registers: each
// warp's 16 rows as mma.sync m16n8k8's A fragment) * B (8 x 8 kTiles,
// descriptor, K-major; the tensor cores read float32 and use its TF32 part),
// plus D where kAdd.
template <bool kAdd, int kTiles>
__device__ __forceinline__ void wgmma_rs_tf32(float (&d)[kTiles][4],
                                              const uint32_t (&a)[4],
                                              uint64_t b) {
  if constexpr (kTiles == 2) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 " FGL_WGMMA_R8
        ", {%8, %9, %10, %11}, %12, %13, 1, 1;"
        : FGL_WGMMA_D8(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int{kAdd}));
  } else {
    static_assert(kTiles == 4, "16 or 32 rows of B");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 " FGL_WGMMA_R16
        ", {%16, %17, %18, %19}, %20, %21, 1, 1;"
        : FGL_WGMMA_D16(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int{kAdd}));
  }
}

// D (64 x 128, float32) = A (64 x 16 of T, __half or __nv_bfloat16, in
// registers: each warp's 16 rows as mma.sync m16n8k16's A fragment) * B
// (16 x 128, descriptor, K-major), plus D where kAdd. Accumulator i of a
// thread is row 16 warp + lane / 4 + 8 (i / 2 % 2), column 8 (i / 4) +
// 2 (lane % 4) + i % 2.
template <typename T, bool kAdd>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64],
                                                    const uint32_t (&a)[4],
                                                    uint64_t b) {
#define FGL_WGMMA_N128(type)                                                   \
  asm volatile(                                                                \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type             \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "    \
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, " \
      "%29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, " \
      "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, " \
      "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, %69, "   \
      "1, 1, 0;"                                                               \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),            \
        "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),            \
        "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),       \
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),       \
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),       \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),       \
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),       \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),       \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),       \
        "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),       \
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),       \
        "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),       \
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                     \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int{kAdd}))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    FGL_WGMMA_N128("bf16");
  } else {
    FGL_WGMMA_N128("f16");
  }
#undef FGL_WGMMA_N128
}

#undef FGL_WGMMA_D4
#undef FGL_WGMMA_D8
#undef FGL_WGMMA_D16
#undef FGL_WGMMA_R8
#undef FGL_WGMMA_R16

// float32 to TF32 (in a float32 register, the low 13 bits zero), rounded to
// nearest even.
__device__ __forceinline__ uint32_t cvt_rn_tf32(float v) {
  uint32_t r;
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

}  // namespace fgl::cuda::ptx
