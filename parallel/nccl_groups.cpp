#include "fgl/parallel/nccl_groups.h"

#include <c10/util/Exception.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace fgl {
namespace {

constexpr const char* kHost = "127.0.0.1";

c10d::TCPStoreOptions store_options(int world_size,
                                    std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.numWorkers = world_size;
  options.waitWorkers = false;
  options.timeout = timeout;
  return options;
}

}  // namespace

bool nccl_available() { return true; }

GroupFactory nccl_groups(int world_size, std::chrono::milliseconds timeout) {
  TORCH_CHECK(world_size >= 1,
              "nccl_groups: world_size must be at least 1, got ", world_size);
  auto server_options = store_options(world_size, timeout);
  server_options.isServer = true;
  server_options.port = 0;  // any free port
  auto server = c10::make_intrusive<c10d::TCPStore>(kHost, server_options);
  return [server, world_size, timeout](int rank) {
    c10::intrusive_ptr<c10d::Store> store = server;
    if (rank != 0) {
      auto client_options = store_options(world_size, timeout);
      client_options.port = server->getPort();
      store = c10::make_intrusive<c10d::TCPStore>(kHost, client_options);
    }
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        store, rank, world_size, options);
    auto group =
        c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::NCCL, backend);
    group->setDefaultBackend(c10d::ProcessGroup::NCCL);
    return group;
  };
}

}  // namespace fgl
