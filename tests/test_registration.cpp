// The op library registers one schema with CPU, CUDA, Meta and Autograd
// kernels.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

namespace {

c10::OperatorHandle find_op(const char* overload) {
  auto op =
      c10::Dispatcher::singleton().findSchema({"fgl::gather_linear", overload});
  EXPECT_TRUE(op.has_value()) << "fgl::gather_linear." << overload;
  return *op;
}

TEST(Registration, SchemaIsAsDocumented) {
  EXPECT_EQ(c10::toString(find_op("").schema()),
            "fgl::gather_linear(Tensor x, Tensor weight, Tensor? bias=None) "
            "-> Tensor");
  EXPECT_EQ(c10::toString(find_op("out").schema()),
            "fgl::gather_linear.out(Tensor x, Tensor weight, Tensor? "
            "bias=None, *, Tensor(a!) out) -> Tensor(a!)");
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
}

}  // namespace
