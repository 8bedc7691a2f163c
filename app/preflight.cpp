#include "preflight.h"

#include <ATen/Context.h>
#include <unistd.h>

#include <utility>

#include "errors.h"
#include "fgl/io/paths.h"
#include "fgl/parallel/nccl_groups.h"

namespace fgl::app {

void require_readable_file(const std::string& path, const char* what,
                           int64_t max_bytes) {
  if (!io::path_exists(path)) {
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " does not exist",
                   "check the path; fgl_infer --help lists what it reads");
  }
  if (io::is_directory(path)) {
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " is a directory",
                   "pass the tensor file inside it, not the directory");
  }
  if (!io::is_regular_file(path)) {
    // A FIFO or a device would block or never end.
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " is not a regular file",
                   "pass a tensor file, not a pipe, socket or device");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " is not readable",
                   "check the file's permissions");
  }
  const int64_t size = io::file_size(path);
  if (size > max_bytes) {
    throw AppError(
        kExitDataErr,
        std::string(what) + " " + path + " has " + std::to_string(size) +
            " bytes, more than the limit of " + std::to_string(max_bytes),
        "raise --max-input-bytes if the file is meant to be this "
        "large");
  }
}

void require_creatable_output(const InferOptions& o) {
  const std::string& path = o.output;
  const std::string dir = io::parent_directory(path);
  const std::string hint =
      "choose an --output path in an existing, writable directory";
  if (io::is_directory(path)) {
    throw AppError(kExitCantCreate, "output " + path + " is a directory",
                   "give a file name, e.g. --output " + path + "/y.pt");
  }
  if (io::is_special_file(path)) {
    throw AppError(kExitCantCreate,
                   "output " + path +
                       " exists and is not a regular file (a link, device "
                       "node, FIFO or socket)",
                   "give a new file name or a regular file to replace");
  }
  for (const auto& [option, input] :
       {std::pair{"--input", &o.input}, std::pair{"--weights", &o.weights},
        std::pair{"--model", &o.model}}) {
    if (!input->empty() && io::same_file(path, *input)) {
      throw AppError(
          kExitUsage,
          "--output " + path + " is the same file as " + option + " " + *input,
          "write the results to another file");
    }
  }
  if (!io::is_directory(dir)) {
    throw AppError(kExitCantCreate,
                   "cannot create output " + path + ": " + dir +
                       " is not an existing directory",
                   hint);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw AppError(kExitCantCreate,
                   "cannot create output " + path + ": directory " + dir +
                       " is not writable",
                   hint);
  }
}

c10::Device resolve_device(const std::optional<c10::Device>& requested) {
  const int64_t gpus = at::hasCUDA() ? at::getNumGPUs() : 0;
  if (!requested) {
    return gpus > 0 ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  const c10::Device device = *requested;
  if (device.is_cuda() && device.index() >= gpus) {
    throw AppError(
        kExitUnavailable,
        "--device " + device.str() + " requested but this machine has " +
            (gpus == 0 ? "no usable CUDA GPU"
                       : std::to_string(gpus) + " GPU(s)"),
        gpus == 0 ? "use --device cpu (or auto)"
                  : "use --device cuda:0 .. cuda:" + std::to_string(gpus - 1) +
                        " or auto");
  }
  return device;
}

std::vector<c10::Device> tensor_parallel_devices(int n) {
  const int64_t gpus = at::hasCUDA() ? at::getNumGPUs() : 0;
  if (n > gpus) {
    throw AppError(
        kExitUnavailable,
        "--tensor-parallel " + std::to_string(n) +
            " needs that many GPUs but this machine has " +
            (gpus == 0 ? "no usable CUDA GPU" : std::to_string(gpus)),
        gpus == 0 ? "leave --tensor-parallel out to run on the CPU"
                  : "pass --tensor-parallel " + std::to_string(gpus) +
                        " or fewer, or leave it out");
  }
  if (!nccl_available()) {
    throw AppError(kExitUnavailable,
                   "--tensor-parallel needs NCCL, which this build of "
                   "fgl_infer lacks",
                   "configure fgl with CUDA and the nvidia-nccl package "
                   "beside torch");
  }
  std::vector<c10::Device> devices;
  for (int p = 0; p < n; ++p) devices.emplace_back(c10::kCUDA, p);
  return devices;
}

}  // namespace fgl::app
