// NCCL process groups for the ranks of one process (TensorParallelRunner's
// ranks, GPU p for rank p), meeting through a c10d TCPStore on
// 127.0.0.1. NVLink multicast is left to the caller's environment
// (NCCL_NVLS_ENABLE=0 keeps it off).
#pragma once

#include <chrono>

#include "fgl/parallel/tensor_parallel_runner.h"

namespace fgl {

/// Whether this build can make NCCL groups (CUDA and NCCL's header were
/// found when it was configured).
bool nccl_available();

/// A GroupFactory for `world_size` ranks over NCCL. The store listens on a
/// port the system picks. `timeout` bounds the rendezvous and every
/// collective: a rank that stops answering makes the others fail rather
/// than hang. Throws c10::Error where nccl_available() is false.
GroupFactory nccl_groups(int world_size, std::chrono::milliseconds timeout);

}  // namespace fgl
