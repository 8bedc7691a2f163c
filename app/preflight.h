// fgl_infer's checks before any work: the files it reads and writes, and
// the device it runs on. Each throws AppError with the exit code and a hint.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace fgl::app {

/// `path` (the `what` file: "input", "weights", "model") exists, is a
/// readable regular file and holds at most `max_bytes`.
void require_readable_file(const std::string& path, const char* what,
                           int64_t max_bytes);

/// --output can be created, and would replace no link, device node, FIFO or
/// input file of the run.
void require_creatable_output(const InferOptions& options);

/// --device: the requested device, which must exist; auto (empty) is
/// cuda:0 where a GPU is usable, else the CPU.
c10::Device resolve_device(const std::optional<c10::Device>& requested);

/// --tensor-parallel N: cuda:0 .. N-1, which must exist, in a build with
/// NCCL.
std::vector<c10::Device> tensor_parallel_devices(int n);

}  // namespace fgl::app
