// The op library registers gather_linear (and its out= overload) with CPU,
// CUDA, Meta and Autograd kernels, and gather_linear_route with CPU and CUDA
// kernels (Autograd falls through to them).
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

namespace {

c10::OperatorHandle find_op(const char* overload,
                            const char* name = "fgl::gather_linear") {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  EXPECT_TRUE(op.has_value()) << name << "." << overload;
  return *op;
}

TEST(Registration, SchemaIsAsDocumented) {
  EXPECT_EQ(c10::toString(find_op("").schema()),
            "fgl::gather_linear(Tensor x, Tensor weight, Tensor? bias=None) "
            "-> Tensor");
  EXPECT_EQ(c10::toString(find_op("out").schema()),
            "fgl::gather_linear.out(Tensor x, Tensor weight, Tensor? "
            "bias=None, *, Tensor(a!) out) -> Tensor(a!)");
  EXPECT_EQ(c10::toString(find_op("", "fgl::gather_linear_route").schema()),
            "fgl::gather_linear_route(Tensor x, Tensor weight, Tensor? "
            "bias=None) -> str");
}

TEST(Registration, EveryBackendHasAKernel) {
  for (const char* overload : {"", "out"}) {
    const auto op = find_op(overload);
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) << overload;
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) << overload;
    // One Autograd kernel (the alias key) serves every device.
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::Autograd))
        << overload;
#ifdef FGL_WITH_CUDA
    EXPECT_TRUE(op.hasKernelForDispatchKey(c10::DispatchKey::CUDA)) << overload;
#endif
  }
  const auto route = find_op("", "fgl::gather_linear_route");
  EXPECT_TRUE(route.hasKernelForDispatchKey(c10::DispatchKey::CPU));
#ifdef FGL_WITH_CUDA
  EXPECT_TRUE(route.hasKernelForDispatchKey(c10::DispatchKey::CUDA));
#endif
}

}  // namespace
