// The schema of the fgl ops (the one TORCH_LIBRARY block of the namespace) and
// the public C++ entry points, which go through the dispatcher. Kernels
// register per backend in cpu/, cuda/ and meta/.
#include "fgl/gather_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

TORCH_LIBRARY(fgl, m) {
  // linear(cat(x.unbind(0), -1), weight, bias) without the cat; x [R, B, H].
  m.def("gather_linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor");
  // gather_linear into a preallocated [B, K] output.
  m.def(
      "gather_linear.out(Tensor x, Tensor weight, Tensor? bias=None, *, "
      "Tensor(a!) out) -> Tensor(a!)");
  // The route gather_linear takes for these inputs (fgl/gather_linear.h).
  m.def(
      "gather_linear_route(Tensor x, Tensor weight, Tensor? bias=None) -> "
      "str");
}

namespace fgl {

at::Tensor gather_linear(const at::Tensor& x, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("fgl::gather_linear", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&,
                                         const std::optional<at::Tensor>&)>();
  return op.call(x, weight, bias);
}

at::Tensor& gather_linear_out(at::Tensor& out, const at::Tensor& x,
                              const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fgl::gather_linear", "out")
          .typed<at::Tensor&(const at::Tensor&, const at::Tensor&,
                             const std::optional<at::Tensor>&, at::Tensor&)>();
  return op.call(x, weight, bias, out);
}

std::string gather_linear_route(const at::Tensor& x, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("fgl::gather_linear_route", "")
                       .typed<std::string(const at::Tensor&, const at::Tensor&,
                                          const std::optional<at::Tensor>&)>();
  return op.call(x, weight, bias);
}

}  // namespace fgl
