// fgl::gather_linear_route: the route gather_linear takes, as the routing
// policies choose it (and as tests and benchmarks force it), on each device.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

// A batch-major [B, R, H] buffer seen head-major: its strides already hold
// the concatenation (a gathered view).
at::Tensor batch_major_x(int64_t R, int64_t B, int64_t H,
                         const at::Device& dev) {
  return random_tensor({B, R, H}, at::kFloat, dev).permute({1, 0, 2});
}

// Whether `name` is the name of one of `routes` (cpu:: or cuda::, whose
// route_name argument lookup finds).
template <typename Route, size_t N>
bool names_one_of(const std::string& name, const Route (&routes)[N]) {
  return std::any_of(std::begin(routes), std::end(routes),
                     [&](Route r) { return name == route_name(r); });
}

// The message of the c10::Error `fn` throws; empty where it throws none.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return {};
}

// On `dev`, over an x with no gathered view: the policy's route has one of
// `routes`' names; each route of `runnable`, forced, is taken under the name
// given; `view`, forced, only where x's strides hold the concatenation (the
// policy's route otherwise); the policy's again once nothing is forced.
template <typename Route, size_t N>
void expect_forced_routes_named(
    const at::Device& dev, const Route (&routes)[N],
    std::initializer_list<std::pair<Route, const char*>> runnable,
    std::pair<Route, const char*> view) {
  const auto x = random_tensor({3, 4, 16}, at::kFloat, dev);
  const auto w = random_tensor({5, 48}, at::kFloat, dev);
  const std::string policy = gather_linear_route(x, w);
  EXPECT_TRUE(names_one_of(policy, routes)) << policy;
  for (const auto& [route, name] : runnable) {
    const ScopedRoute forced(route);
    EXPECT_EQ(gather_linear_route(x, w), name);
  }
  {
    const ScopedRoute forced(view.first);
    EXPECT_EQ(gather_linear_route(x, w), policy);
    EXPECT_EQ(gather_linear_route(batch_major_x(3, 4, 16, dev), w),
              view.second);
  }
  EXPECT_EQ(gather_linear_route(x, w), policy);  // the force is gone
}

TEST(GatherLinearRoute, NamesTheForcedCpuRouteWhereItRuns) {
  expect_forced_routes_named(at::Device(at::kCPU), cpu::kRoutes,
                             {{cpu::Route::kGemmSlices, "gemm-slices"},
                              {cpu::Route::kGemmCat, "gemm-cat"}},
                             {cpu::Route::kGemmView, "gemm-view"});
}

TEST(GatherLinearRoute, NamesTheForcedCudaRouteWhereItRuns) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  expect_forced_routes_named(
      at::Device(at::kCUDA, 0), cuda::kRoutes,
      {{cuda::Route::kTiled, "tiled"}, {cuda::Route::kCublasCat, "cublas-cat"}},
      {cuda::Route::kCublasView, "cublas-view"});
}

TEST(GatherLinearRoute, IsEmptyWhereNothingIsMultiplied) {
  for (const auto& dev : available_devices()) {
    SCOPED_TRACE(dev.str());
    for (const Shape s : {Shape{2, 0, 8, 5}, Shape{2, 3, 8, 0},
                          Shape{0, 3, 4, 5}, Shape{3, 4, 0, 5}}) {
      SCOPED_TRACE(::testing::Message() << s);
      const auto x = at::empty({s.R, s.B, s.H}, at::device(dev));
      const auto w = at::empty({s.K, s.R * s.H}, at::device(dev));
      EXPECT_EQ(gather_linear_route(x, w, at::empty({s.K}, at::device(dev))),
                "empty");
    }
  }
}

TEST(GatherLinearRoute, RejectsWhatTheOpRejectsWithItsMessage) {
  const auto x = random_tensor({2, 3, 4}, at::kFloat, at::kCPU);
  const auto bad_weight = random_tensor({5, 9}, at::kFloat, at::kCPU);
  const auto half_weight = random_tensor({5, 8}, at::kHalf, at::kCPU);
  const auto bad_bias = random_tensor({4}, at::kFloat, at::kCPU);
  const auto weight = random_tensor({5, 8}, at::kFloat, at::kCPU);
  const std::vector<std::pair<at::Tensor, std::optional<at::Tensor>>> cases = {
      {bad_weight, std::nullopt},
      {half_weight, std::nullopt},
      {weight, bad_bias}};
  for (const auto& [w, b] : cases) {
    const std::string op_error = error_of([&] { gather_linear(x, w, b); });
    ASSERT_FALSE(op_error.empty());
    EXPECT_EQ(error_of([&] { gather_linear_route(x, w, b); }), op_error);
  }
  EXPECT_TRUE(throws_with([&] { gather_linear_route(x, bad_weight); },
                          {"weight", "R*H = 8"}));
}

}  // namespace
}  // namespace fgl::testing
