// nccl_groups.h where the build found no CUDA or no nccl.h.
#include <c10/util/Exception.h>

#include "fgl/parallel/nccl_groups.h"

namespace fgl {

bool nccl_available() { return false; }

GroupFactory nccl_groups(int /*world_size*/,
                         std::chrono::milliseconds /*timeout*/) {
  TORCH_CHECK(false,
              "this build of fgl has no NCCL: configure it with CUDA and "
              "NCCL's header (the PyPI package nvidia-nccl beside torch)");
}

}  // namespace fgl
