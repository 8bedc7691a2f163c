// CUDA-only properties of fgl::gather_linear: stream and device handling.
// Skips where the process sees no GPU.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda/gather_linear_kernel.h"
#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

TEST(GatherLinearCuda, CapturesOnTheCurrentStream) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  // Capture fails if the kernel is enqueued on any stream but the current
  // (capturing) one, e.g. the legacy default stream.
  const at::Device dev(at::kCUDA, 0);
  const auto x = random_tensor({6, 9, 40}, at::kFloat, dev);
  const auto w = random_tensor({70, 240}, at::kFloat, dev);
  const auto b = random_tensor({70}, at::kFloat, dev);
  auto out = at::full({9, 70}, NAN, x.options());

  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard side(at::cuda::getStreamFromPool());
    graph.capture_begin();
    gather_linear_out(out, x, w, b);
    graph.capture_end();
  }
  graph.replay();
  at::cuda::device_synchronize();
  EXPECT_TRUE(matches_reference(out, reference_gather_linear(x, w, b)));
}

// Whether this GPU routes as the H200 the shape lists below were chosen on
// (sm_90 with 132 multiprocessors, the Hopper kernels built): there each
// forced route must take the problems its test names, or the test would
// check the policy's route in its place.
bool routes_as_measured() {
#ifdef FGL_WITH_WGMMA
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return prop->major * 10 + prop->minor == cuda::kStreamArch &&
         prop->multiProcessorCount == 132;
#else
  return false;
#endif
}

// Runs the op twice: the same inputs must give the same bits (sums meet in
// a fixed order, no atomics), both close to the float64 reference.
void expect_exact_and_deterministic(const at::Tensor& x, const at::Tensor& w,
                                    const at::Tensor& b) {
  const auto first = gather_linear(x, w, b);
  auto second = at::full_like(first, NAN);
  gather_linear_out(second, x, w, b);
  EXPECT_TRUE(at::equal(first, second));
  EXPECT_TRUE(
      matches_reference(first, reference_gather_linear(x, w, b),
                        reference_gather_linear(x.abs(), w.abs(), b.abs())));
}

// The same, `route` forced over each problem in every dtype. Returns the
// problems the route took in at least one dtype (where it cannot run one,
// the policy's route does).
std::vector<Shape> expect_exact_and_deterministic(
    cuda::Route route, const std::vector<Shape>& shapes) {
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(route);
  std::vector<Shape> taken;
  for (const auto& s : shapes) {
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message() << s << " " << dtype);
      const auto x = random_tensor({s.R, s.B, s.H}, dtype, dev);
      const auto w = random_tensor({s.K, s.R * s.H}, dtype, dev);
      const auto b = random_tensor({s.K}, dtype, dev);
      if (gather_linear_route(x, w, b) == cuda::route_name(route) &&
          (taken.empty() || !(taken.back() == s))) {
        taken.push_back(s);
      }
      expect_exact_and_deterministic(x, w, b);
    }
  }
  return taken;
}

// The streaming kernel where the sweep's small shapes do not reach: a
// contraction split over a cluster of blocks (decode at 32,16,128,4096), a
// weight ring that wraps around many times (many columns, no split), several
// row tiles (the last one short past 32 rows), x's tiles in the ring
// at each block height (8, 16 and 32 rows: float32 by warp group at 16 and
// 32), and float32's copies of several weight stages (blocks of 129 and 137
// stages: each split's last copy runs past its stages, the last split's
// past the weight) with x in the ring, in a slab (H = 33) and by CUDA cores
// (3 rows); small problems of many row tiles, x in a slab.
TEST(StreamKernel, IsExactAndDeterministic) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const std::vector<Shape> shapes = {
      {32, 16, 128, 4096}, {32, 1, 128, 4096}, {16, 3, 128, 9000},
      {7, 40, 64, 200},    {8, 6, 64, 200},    {32, 200, 128, 300},
      {43, 16, 768, 64},   {1056, 8, 33, 64},  {43, 3, 768, 64},
      {12, 90, 33, 32},    {24, 205, 33, 32},  {24, 77, 96, 29}};
  const auto taken =
      expect_exact_and_deterministic(cuda::Route::kStream, shapes);
  if (routes_as_measured()) EXPECT_EQ(taken, shapes);
}

// The warp-dot kernel's layouts: few columns, whose contraction warps split
// (up to 16 ways) and add through shared memory; a split whose last slice
// is short; many row tiles; columns that do not fill a block; a long
// contraction over few columns and many row tiles; rows that are not
// 16-byte vectors, read an element at a time (H = 33, 13).
TEST(WarpDotKernel, IsExactAndDeterministic) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const std::vector<Shape> shapes = {
      {32, 1, 128, 56},   {32, 2, 128, 3},   {9, 3, 200, 5},    {4, 12, 32, 56},
      {16, 37, 64, 1001}, {64, 18, 112, 32}, {64, 62, 112, 16}, {3, 20, 33, 80},
      {12, 90, 33, 32},   {5, 7, 13, 9},     {31, 2, 33, 1000}};
  const auto taken =
      expect_exact_and_deterministic(cuda::Route::kWarpDot, shapes);
  if (routes_as_measured()) EXPECT_EQ(taken, shapes);
}

// Rows read in place that are not 16-byte vectors: x's heads a slice of
// wider ones, one element past a 16-byte boundary, or x batch-major
// (permuted), and the weight's rows a slice of wider ones: the element-wide
// instance reads them through their strides, as the 16-byte one reads
// aligned rows.
TEST(WarpDotKernel, ReadsRowsThatAreNotVectorsInPlace) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(cuda::Route::kWarpDot);
  for (const Shape& s : {Shape{4, 12, 32, 56}, Shape{3, 20, 33, 80}}) {
    for (const auto dtype : supported_dtypes()) {
      for (const bool batch_major : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << s << " " << dtype
                     << (batch_major ? " batch-major" : ""));
        const auto x =
            batch_major
                ? random_tensor({s.B, s.R, s.H}, dtype, dev).permute({1, 0, 2})
                : random_tensor({s.R, s.B, s.H + 3}, dtype, dev)
                      .narrow(2, 1, s.H);
        const auto w = random_tensor({s.K, s.R * s.H + 5}, dtype, dev)
                           .narrow(1, 1, s.R * s.H);
        const auto b = random_tensor({s.K}, dtype, dev);
        EXPECT_EQ(gather_linear_route(x, w, b), "warp-dot");
        expect_exact_and_deterministic(x, w, b);
      }
    }
  }
}

// The warp-mma kernel's layouts: a contraction shorter than one chunk and
// than the four lanes that share a row (2,64,8,33), warps splitting a long
// contraction 16 ways, a split whose last slice is short, one and two
// n-tiles per warp with rows past B, several row tiles (tens of them at
// 8,500,64,250), columns past K in the last group, blocks of two groups
// with the first step prefetched (8,1,128,8192 in 16-bit types); float32
// through its three TF32 products, float64 through the policy.
TEST(WarpMmaKernel, IsExactAndDeterministic) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const std::vector<Shape> shapes = {{2, 64, 8, 33},     {32, 1, 128, 56},
                                     {9, 3, 200, 5},     {4, 12, 32, 56},
                                     {16, 37, 64, 1001}, {32, 16, 128, 4096},
                                     {8, 1, 128, 8192},  {8, 500, 64, 250},
                                     {3, 142, 80, 184},  {8, 88, 32, 387}};
  const auto taken =
      expect_exact_and_deterministic(cuda::Route::kWarpMma, shapes);
  if (routes_as_measured()) EXPECT_EQ(taken, shapes);
}

// Where the float64 reference `ref` holds NaN, +Inf and -Inf, so does `got`
// (on the CPU), and its finite outputs keep their accuracy.
void expect_non_finite_as_in(const at::Tensor& got, const at::Tensor& ref) {
  const auto out = got.to(at::kDouble);
  EXPECT_TRUE(at::equal(out.isnan(), ref.isnan()));
  EXPECT_TRUE(at::equal(out.isposinf(), ref.isposinf()));
  EXPECT_TRUE(at::equal(out.isneginf(), ref.isneginf()));
  const auto finite = ref.isfinite();
  EXPECT_TRUE(matches_reference(got.masked_fill(~finite, 0),
                                ref.masked_fill(~finite, 0)));
}

// NaN, +Inf and -Inf land where cat + linear puts them under `route`, for
// every row tile size and dtype, and the finite outputs keep their accuracy.
// R heads of 64 (R >= 3); on the measured GPU the route must take some of
// the problems (where it cannot run one, the policy's route does).
void expect_nan_and_inf_as_in_the_reference(cuda::Route route, int64_t R = 3) {
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(route);
  const double inf = std::numeric_limits<double>::infinity();
  int taken = 0;
  for (const int64_t B : {4, 8, 16, 32}) {
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message() << "B=" << B << " " << dtype);
      const int64_t H = 64, K = 80;
      // Positive values: no finite sum may cancel an infinity.
      auto x = at::rand({R, B, H}, at::kDouble) + 0.5;
      auto w = at::rand({K, R * H}, at::kDouble) + 0.5;
      auto b = at::rand({K}, at::kDouble);
      x[0][1][7] = NAN;   // row 1: NaN everywhere
      w[2][100] = inf;    // column 2: +Inf ...
      x[1][3][36] = 0.0;  // ... but Inf * 0 = NaN in row 3
      w[5][3] = inf;      // column 5: +Inf and -Inf meet: NaN
      w[5][150] = -inf;
      w[70][10] = -inf;  // column 70 (second tile): -Inf
      b[9] = inf;        // column 9: +Inf from the bias
      x = x.to(dev, dtype);
      w = w.to(dev, dtype);
      b = b.to(dev, dtype);
      taken += gather_linear_route(x, w, b) == cuda::route_name(route);
      const auto ref = reference_gather_linear(x, w, b);
      EXPECT_TRUE(ref[1].isnan().all().item<bool>());
      EXPECT_TRUE(ref[0][2].isposinf().item<bool>());
      EXPECT_TRUE(ref[3][2].isnan().item<bool>());
      EXPECT_TRUE(ref[0][5].isnan().item<bool>());
      EXPECT_TRUE(ref[0][70].isneginf().item<bool>());
      EXPECT_TRUE(ref[0][9].isposinf().item<bool>());
      expect_non_finite_as_in(gather_linear(x, w, b).cpu(), ref);
    }
  }
  if (routes_as_measured()) EXPECT_GT(taken, 0) << cuda::route_name(route);
}

// float32 on the tensor cores splits each value into two TF32 parts, whose
// remainder turns an Inf into NaN; the kernel recomputes such outputs (CUDA
// cores below 8 rows, tensor cores from 8).
TEST(StreamKernel, NanAndInfPropagateAsInTheReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kStream);
}

// The residency the streaming kernel's planner reads: one block a
// multiprocessor, so every multiprocessor holds a cluster of one, and
// clusters of more blocks fit at most sm_count / size times.
TEST(StreamKernel, ResidentClustersFitTheMultiprocessors) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major * 10 + prop->minor != cuda::kStreamArch) {
    GTEST_SKIP() << "the streaming kernel is built for sm_90 alone";
  }
  cuda::ResidentClusters counts{};
  ASSERT_EQ(cuda::stream_resident_clusters(at::cuda::current_device(), counts),
            cudaSuccess);
  EXPECT_EQ(counts[1], prop->multiProcessorCount);
  for (int size = 2; size < static_cast<int>(counts.size()); ++size) {
    SCOPED_TRACE(::testing::Message() << "clusters of " << size);
    EXPECT_GE(counts[size], 1);
    EXPECT_LE(counts[size] * size, prop->multiProcessorCount);
    EXPECT_LE(counts[size], counts[size - 1]);
  }
}

TEST(WarpDotKernel, NanAndInfPropagateAsInTheReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kWarpDot);
}

TEST(WarpMmaKernel, NanAndInfPropagateAsInTheReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kWarpMma);
}

TEST(TensorCoreKernel, NanAndInfPropagateAsInTheReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kWgmma);
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kWgmmaPingpong);
  // The split needs 8 stages of 64 or more: 16 heads, clusters of up to 4.
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kWgmmaSplit, 16);
  expect_nan_and_inf_as_in_the_reference(cuda::Route::kWgmmaStationary);
}

// The Hopper tensor-core kernel's tiles: a persistent block taking several
// tiles in turn (more tiles than multiprocessors; at 6,8400,32,520 three a
// block, each longer than the ring, so both consumer groups come round to
// a stage again), rows and columns past B and K in the last tiles, a long
// contraction over many stages, and H not a multiple of the stage's width;
// float32 through its three TF32 products. Both schedules (float32 has only
// the shared one; forced to ping-pong it takes the policy's route).
TEST(TensorCoreKernel, IsExactAndDeterministic) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const std::vector<Shape> shapes = {
      {32, 300, 128, 520},  {3, 2100, 40, 2000}, {1, 130, 128, 257},
      {6, 8400, 32, 520},   {16, 130, 128, 701}, {16, 200, 64, 300},
      {16, 1000, 128, 520}, {4, 200, 128, 300},  {8, 9000, 64, 512},
      {4, 1, 128, 200},     {2, 333, 64, 72},    {2, 130, 64, 16000}};
  // The split, in clusters of 2 to 8 as its tiles and stages allow
  // (16,1000,128,520: 40 tiles in clusters of 3), out's rows in stores of
  // four columns or, K odd (16,130,128,701), of one.
  const std::vector<Shape> split_shapes = {
      {32, 300, 128, 520},  {16, 130, 128, 701}, {16, 200, 64, 300},
      {16, 1000, 128, 520}, {4, 200, 128, 300},  {4, 1, 128, 200}};
  // The stationary weight: the contractions of up to 8 stages, its ring
  // round more than once a tile and two and three tiles a block
  // (6,8400,32,520, 8,9000,64,512), the last column tile leaving the second
  // consumer group 8 columns of K (4,1,128,200 and 2,333,64,72), and 125
  // column tiles (2,130,64,16000).
  const std::vector<Shape> stationary_shapes = {
      {3, 2100, 40, 2000}, {1, 130, 128, 257}, {6, 8400, 32, 520},
      {4, 200, 128, 300},  {8, 9000, 64, 512}, {4, 1, 128, 200},
      {2, 333, 64, 72},    {2, 130, 64, 16000}};
  for (const auto route :
       {cuda::Route::kWgmma, cuda::Route::kWgmmaPingpong,
        cuda::Route::kWgmmaSplit, cuda::Route::kWgmmaStationary}) {
    SCOPED_TRACE(cuda::route_name(route));
    const auto taken = expect_exact_and_deterministic(route, shapes);
    if (!routes_as_measured()) continue;
    if (route == cuda::Route::kWgmmaSplit) {
      EXPECT_EQ(taken, split_shapes);
    } else if (route == cuda::Route::kWgmmaStationary) {
      EXPECT_EQ(taken, stationary_shapes);
    } else {
      EXPECT_EQ(taken, shapes);
    }
  }
}

// Allows TF32 in float32 matmuls (at::globalContext()) while it lives.
class ScopedTf32 {
 public:
  explicit ScopedTf32(bool allow)
      : saved_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuBLAS(allow);
  }
  ~ScopedTf32() { at::globalContext().setAllowTF32CuBLAS(saved_); }
  ScopedTf32(const ScopedTf32&) = delete;
  ScopedTf32& operator=(const ScopedTf32&) = delete;

 private:
  bool saved_;
};

// float32 values rounded to TF32 (10 mantissa bits, to nearest even): what
// the copy engine hands the TF32 tensor cores.
at::Tensor round_to_tf32(const at::Tensor& v) {
  const auto bits = v.cpu().contiguous().view(at::kInt);
  const auto odd = bits.bitwise_right_shift(13).bitwise_and(1);
  return (bits + 0xfff + odd).bitwise_and(~0x1fff).view(at::kFloat);
}

bool runs_tensor_core_kernel() {
#ifdef FGL_WITH_WGMMA
  return at::cuda::getCurrentDeviceProperties()->major == 9;
#else
  return false;
#endif
}

// float32 on the Hopper tensor-core kernel multiplies as TF32 only where the
// user allowed TF32: then it computes the float64 sum of the TF32-rounded
// operands to about float32 accuracy; otherwise (three TF32 products) it
// stays float32-accurate. The shapes cover an H that is not a multiple of
// the 32-wide K-tile, out rows the copy engine cannot store (K odd),
// several tiles, and contractions long enough to sum four stages at a
// time (Config::stages_per_sum), one of them an odd count of stages
// (23,150,96,300: 69).
TEST(TensorCoreKernel, MultipliesFloat32AsTf32OnlyWhereAllowed) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(cuda::Route::kWgmma);
  for (const Shape& s : std::vector<Shape>{{32, 300, 128, 520},
                                           {3, 200, 40, 300},
                                           {1, 130, 128, 257},
                                           {23, 150, 96, 300}}) {
    SCOPED_TRACE(::testing::Message() << s);
    const auto x = random_tensor({s.R, s.B, s.H}, at::kFloat, dev);
    const auto w = random_tensor({s.K, s.R * s.H}, at::kFloat, dev);
    const auto b = random_tensor({s.K}, at::kFloat, dev);
    const auto ref_abs = reference_gather_linear(x.abs(), w.abs(), b.abs());
    {
      const ScopedTf32 tf32(false);
      EXPECT_TRUE(matches_reference(gather_linear(x, w, b),
                                    reference_gather_linear(x, w, b), ref_abs));
    }
    if (runs_tensor_core_kernel()) {
      const ScopedTf32 tf32(true);
      auto out = at::full({s.B, s.K}, NAN, x.options());
      gather_linear_out(out, x, w, b);
      // The tensor cores' float32 additions truncate (bench/NOTES.md, v9):
      // four times the rounding bound of a float32 sum.
      EXPECT_TRUE(matches_reference(
          out, reference_gather_linear(round_to_tf32(x), round_to_tf32(w), b),
          4 * ref_abs));
    }
  }
}

// One pass's shared tiles in each width wgmma_fitted_tile_cols() picks on
// 132 multiprocessors (KernelChoice.OnePassTilesFillTheGridsRounds): 132
// tiles of 256 columns, 132 of 192 over H = 40 and 4 of 192 with K odd
// (stored from registers; at K = 2300 too in the half types, whose rows
// are not 16-byte aligned there). The half types exact and deterministic
// (float32 there takes its three products' own tiles), then float32 under TF32
// to the TF32-rounded operands' sum, the same bits twice.
TEST(TensorCoreKernel, IsExactInEachFittedTileWidth) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const std::vector<Shape> shapes = {
      {2, 1408, 64, 3072}, {3, 1400, 40, 2300}, {1, 130, 128, 257}};
  const auto taken =
      expect_exact_and_deterministic(cuda::Route::kWgmma, shapes);
  if (routes_as_measured()) EXPECT_EQ(taken, shapes);
  if (!runs_tensor_core_kernel()) return;
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(cuda::Route::kWgmma);
  const ScopedTf32 tf32(true);
  for (const Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s << " TF32");
    const auto x = random_tensor({s.R, s.B, s.H}, at::kFloat, dev);
    const auto w = random_tensor({s.K, s.R * s.H}, at::kFloat, dev);
    const auto b = random_tensor({s.K}, at::kFloat, dev);
    EXPECT_EQ(gather_linear_route(x, w, b), "wgmma");
    auto first = at::full({s.B, s.K}, NAN, x.options());
    gather_linear_out(first, x, w, b);
    auto second = at::full_like(first, NAN);
    gather_linear_out(second, x, w, b);
    EXPECT_TRUE(at::equal(first, second));
    EXPECT_TRUE(matches_reference(
        first, reference_gather_linear(round_to_tf32(x), round_to_tf32(w), b),
        4 * reference_gather_linear(x.abs(), w.abs(), b.abs())));
  }
}

// The packed instances: heads of 16, 32 or 64 bytes (float32 in three
// products: 4, 8, 16 floats; half types: 8, 16, 32), a step spanning 2 to 8
// whole heads. The last step zero past the last head (R not a multiple of
// the heads a step: 13,300,4,520, 9,8400,16,260, 5,700,32,301), R = 1 at
// 1,130,16,257 (K odd), rows and columns past B and K, a long contraction
// (64,1000,4,1000: 8 steps), one row, and more tiles than multiprocessors
// (9,8400,16,260: 198); out's bits the same call to call, close to
// float64. Unforced, the policy takes float32 16,1024,8,8192 there. Then
// x permuted in memory ((B, R, H) seen as (R, B, H)) without bias, and NaN
// and Inf where cat + linear puts them.
TEST(TensorCoreKernel, PackedHeadsAreExactAndDeterministic) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const ScopedTf32 tf32(false);
  const std::vector<Shape> shapes = {{13, 300, 4, 520}, {1, 130, 16, 257},
                                     {6, 2100, 8, 700}, {64, 1000, 4, 1000},
                                     {3, 1, 8, 300},    {9, 8400, 16, 260},
                                     {5, 700, 32, 301}};
  const auto taken =
      expect_exact_and_deterministic(cuda::Route::kWgmmaPacked, shapes);
  if (routes_as_measured()) EXPECT_EQ(taken, shapes);
  const at::Device dev(at::kCUDA, 0);
  if (routes_as_measured()) {
    // Unforced, the policy takes it over many whole row tiles.
    const auto x = random_tensor({16, 1024, 8}, at::kFloat, dev);
    const auto w = random_tensor({8192, 16 * 8}, at::kFloat, dev);
    EXPECT_EQ(gather_linear_route(x, w, std::nullopt), "wgmma-packed");
  }
  const ScopedRoute forced(cuda::Route::kWgmmaPacked);
  for (const auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (const Shape& s :
         std::vector<Shape>{{13, 300, 8, 520}, {5, 700, 16, 301}}) {
      SCOPED_TRACE(::testing::Message() << s << " " << dtype << ", x permuted");
      const auto x =
          random_tensor({s.B, s.R, s.H}, dtype, dev).permute({1, 0, 2});
      const auto w = random_tensor({s.K, s.R * s.H}, dtype, dev);
      if (runs_tensor_core_kernel()) {
        EXPECT_EQ(gather_linear_route(x, w, std::nullopt), "wgmma-packed");
      }
      auto out = at::full({s.B, s.K}, NAN, x.options());
      gather_linear_out(out, x, w, std::nullopt);
      EXPECT_TRUE(
          matches_reference(out, reference_gather_linear(x, w, std::nullopt),
                            reference_gather_linear(x.abs(), w.abs(), {})));
    }
    SCOPED_TRACE(::testing::Message() << dtype << ", NaN and Inf");
    auto x = random_tensor({13, 300, 8}, at::kDouble, at::kCPU);
    auto w = random_tensor({520, 13 * 8}, at::kDouble, at::kCPU);
    const double inf = std::numeric_limits<double>::infinity();
    x[12][250][3] = NAN;  // row 250
    w[400][99] = inf;     // column 400
    w[7][2] = -inf;       // column 7
    x = x.to(dev, dtype);
    w = w.to(dev, dtype);
    const auto ref = reference_gather_linear(x, w, std::nullopt);
    EXPECT_TRUE(ref[250].isnan().all().item<bool>());
    EXPECT_TRUE(ref[0][400].isinf().item<bool>());
    EXPECT_TRUE(ref[0][7].isinf().item<bool>());
    expect_non_finite_as_in(gather_linear(x, w, std::nullopt).cpu(), ref);
  }
}

// Where out is not the copy engine's (rows not 16-byte aligned: K odd, a
// base one element in, or a transposed view, whose columns are B apart),
// the Hopper kernel stores out itself: a row at a time from shared memory
// where out's columns are contiguous (in the half types rows starting on
// and off a 4-byte word, the last piece of a row cut short), from its
// registers in the transposed view. Every element of a NaN-poisoned out
// is written, close to float64, in the default and ping-pong schedules and
// in every dtype.
TEST(TensorCoreKernel, StoresOutItselfWhereTheCopyEngineCannot) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const at::Device dev(at::kCUDA, 0);
  const ScopedTf32 tf32(false);
  for (const auto route : {cuda::Route::kWgmma, cuda::Route::kWgmmaPingpong}) {
    const ScopedRoute forced(route);
    for (const Shape& s :
         std::vector<Shape>{{4, 300, 64, 520}, {3, 200, 40, 301}}) {
      for (const auto dtype : supported_dtypes()) {
        const auto x = random_tensor({s.R, s.B, s.H}, dtype, dev);
        const auto w = random_tensor({s.K, s.R * s.H}, dtype, dev);
        for (const auto& b : {random_tensor({s.K}, dtype, dev), at::Tensor()}) {
          const auto ref = reference_gather_linear(x, w, b);
          const auto ref_abs = reference_gather_linear(
              x.abs(), w.abs(), b.defined() ? b.abs() : b);
          const auto poisoned = [&](at::IntArrayRef size) {
            return at::full(size, NAN, x.options());
          };
          const std::vector<at::Tensor> outs = {
              poisoned({s.B, s.K}), poisoned({s.B, s.K + 1}).narrow(1, 1, s.K),
              poisoned({s.K, s.B}).t()};
          for (size_t i = 0; i < outs.size(); ++i) {
            SCOPED_TRACE(::testing::Message()
                         << cuda::route_name(route) << " " << s << " " << dtype
                         << " out layout " << i
                         << (b.defined() ? "" : ", no bias"));
            auto out = outs[i];
            gather_linear_out(out, x, w, b);
            EXPECT_TRUE(matches_reference(out, ref, ref_abs));
          }
        }
      }
    }
  }
}

// The Hopper kernel's default schedule with the last round of tiles cut
// along their steps (ops/cuda/tile_schedule.h), in float32's three
// products over 128 x 128 tiles (23,1536,128,1536: 144 tiles, 12 of them
// cut over all 132 blocks, 8 or 9 of their 92 steps a block, so about 11
// blocks add up each tile; 30,1500,96,1537: 156 tiles, 24 cut, rows and
// columns past B and K in the last tiles, K odd; 23,4096,128,1280: 320, 56
// cut; 31,3000,96,1900, H not a multiple of the step, and 32,1024,128,1100
// dealt whole). Out is the same bits call to call whichever block arrives
// last at a tile, close to float64, with and without bias and with x
// permuted in memory; the calls between two calls of a shape leave no
// arrival counts behind.
TEST(TensorCoreKernel, CutsTheLastRoundOfItsTilesExactly) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(cuda::Route::kWgmma);
  const ScopedTf32 tf32(false);
  const std::vector<Shape> shapes = {{23, 1536, 128, 1536},
                                     {30, 1500, 96, 1537},
                                     {23, 4096, 128, 1280},
                                     {31, 3000, 96, 1900},
                                     {32, 1024, 128, 1100}};
  std::vector<at::Tensor> firsts;
  std::vector<std::array<at::Tensor, 3>> inputs;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s);
    // x laid out (B, R, H) in memory and seen as (R, B, H).
    const auto x =
        random_tensor({s.B, s.R, s.H}, at::kFloat, dev).permute({1, 0, 2});
    const auto w = random_tensor({s.K, s.R * s.H}, at::kFloat, dev);
    const auto b = random_tensor({s.K}, at::kFloat, dev);
    if (runs_tensor_core_kernel()) {
      EXPECT_EQ(gather_linear_route(x, w, b), "wgmma");
    }
    // One float64 reference a shape (on the CPU), without the bias and
    // with it added.
    const auto ref_abs = reference_gather_linear(x.abs(), w.abs(), b.abs());
    const auto unbiased_ref = reference_gather_linear(x, w, std::nullopt);
    const auto first = gather_linear(x, w, b);
    EXPECT_TRUE(matches_reference(first, unbiased_ref + b.cpu().to(at::kDouble),
                                  ref_abs));
    auto unbiased = at::full({s.B, s.K}, NAN, x.options());
    gather_linear_out(unbiased, x, w, std::nullopt);
    EXPECT_TRUE(matches_reference(unbiased, unbiased_ref, ref_abs));
    firsts.push_back(first);
    inputs.push_back({x, w, b});
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << shapes[i] << ", again");
    auto again = at::full_like(firsts[i], NAN);
    gather_linear_out(again, inputs[i][0], inputs[i][1], inputs[i][2]);
    EXPECT_TRUE(at::equal(firsts[i], again));
  }
  // NaN and Inf in float32's cut tiles (rows 1408 on at 23,1536,128,1536):
  // the blocks' sums of them added, then recomputed in order where NaN.
  auto x = random_tensor({23, 1536, 128}, at::kFloat, dev);
  auto w = random_tensor({1536, 23 * 128}, at::kFloat, dev);
  x[5][1500][7] = NAN;                                    // row 1500
  w[100][2000] = std::numeric_limits<float>::infinity();  // column 100
  const auto ref = reference_gather_linear(x, w, std::nullopt);
  EXPECT_TRUE(ref[1500].isnan().all().item<bool>());
  EXPECT_TRUE(ref[1450][100].isinf().item<bool>());
  expect_non_finite_as_in(gather_linear(x, w, std::nullopt).cpu(), ref);
}

// The fused kernels are dependent launches (ops/cuda/dependent_launch.cuh):
// each may start while the call before it on the stream still runs. A chain
// of layers, each reading the previous layer's output as its x and writing
// into the buffer the layer before that read, must give the bits it gives
// with the device synchronised between layers: no kernel reads its x
// before it is written, nor overwrites a buffer still being read.
TEST(GatherLinearCuda, DependentLaunchesSeeTheCallsBeforeThem) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const at::Device dev(at::kCUDA, 0);
  constexpr int kLayers = 4;
  // K = R * H: a layer's (B, K) output is the next layer's (R, B, H) x.
  for (const Shape& s : std::vector<Shape>{
           {8, 4, 64, 512}, {32, 1, 128, 4096}, {4, 300, 64, 256}}) {
    for (const auto dtype : supported_dtypes()) {
      const int64_t C = s.R * s.H;
      std::vector<at::Tensor> weights, biases;
      for (int i = 0; i < kLayers; ++i) {
        // Scaled by 1 / sqrt(C), so values keep their size layer to layer.
        weights.push_back(random_tensor({s.K, C}, dtype, dev) / std::sqrt(C));
        biases.push_back(random_tensor({s.K}, dtype, dev));
      }
      const auto x0 = random_tensor({s.B, s.K}, dtype, dev);
      const auto run = [&](bool synchronise) {
        at::Tensor buffers[2] = {x0.clone(), at::full_like(x0, NAN)};
        for (int i = 0; i < kLayers; ++i) {
          const auto x =
              buffers[i % 2].view({s.B, s.R, s.H}).permute({1, 0, 2});
          gather_linear_out(buffers[(i + 1) % 2], x, weights[i], biases[i]);
          if (synchronise) at::cuda::device_synchronize();
        }
        return buffers[kLayers % 2];
      };
      for (const cuda::Route route :
           {cuda::Route::kWarpDot, cuda::Route::kWarpMma, cuda::Route::kStream,
            cuda::Route::kWgmma, cuda::Route::kWgmmaPingpong,
            cuda::Route::kWgmmaSplit, cuda::Route::kWgmmaStationary,
            cuda::Route::kTiled}) {
        SCOPED_TRACE(::testing::Message()
                     << cuda::route_name(route) << " " << s << " " << dtype);
        const ScopedRoute forced(route);
        const auto chained = run(false);
        const auto synchronised = run(true);
        EXPECT_FALSE(synchronised.isnan().any().item<bool>());
        EXPECT_TRUE(at::equal(chained, synchronised));
      }
    }
  }
}

TEST(GatherLinearCuda, FollowsInputsOffTheCurrentDevice) {
  if (at::getNumGPUs() < 2) GTEST_SKIP() << "needs two CUDA devices";
  // The current device stays cuda:0; the op must run where its inputs are.
  const at::Device dev(at::kCUDA, 1);
  const auto x = random_tensor({3, 10, 24}, at::kHalf, dev);
  const auto w = random_tensor({50, 72}, at::kHalf, dev);
  const auto out = gather_linear(x, w);
  EXPECT_EQ(out.device(), dev);
  EXPECT_TRUE(matches_reference(out, reference_gather_linear(x, w, {})));
}

TEST(GatherLinearCuda, RejectsInputsOnMixedDevices) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const auto x = random_tensor({2, 3, 4}, at::kFloat, at::Device(at::kCUDA, 0));
  const auto w = random_tensor({5, 8}, at::kFloat, at::kCPU);
  EXPECT_TRUE(throws_with([&] { gather_linear(x, w); },
                          {"weight must be on x's device cuda:0", "got cpu"}));
  const auto w_cuda = w.to(x.device());
  EXPECT_TRUE(throws_with(
      [&] {
        gather_linear(x, w_cuda, random_tensor({5}, at::kFloat, at::kCPU));
      },
      {"bias must be on x's device cuda:0", "got cpu"}));
}

}  // namespace
}  // namespace fgl::testing
