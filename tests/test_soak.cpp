// Soak: 1000 inferences in one process, each reading its input file, running
// the fused and the reference path and comparing them, must leave resident
// memory flat. A leak of one small tensor per call would grow it by tens of
// megabytes over the run. So must refusing, again and again, a file whose
// pickle puts a tensor in a list that holds itself.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "fgl/io/tensor_file.h"
#include "fgl/io/torch_save_format.h"
#include "fgl/models/gather_linear_module.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

constexpr int kWarmup = 50;
constexpr int kCalls = 1000;
constexpr double kMaxGrowthMb = 20.0;

// Resident set size from /proc/self/statm (its second field, in pages).
double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long total = 0, resident = 0;
  statm >> total >> resident;
  return static_cast<double>(resident) * ::sysconf(_SC_PAGESIZE) / (1 << 20);
}

// ASan holds freed memory in a quarantine (256 MB by default), so resident
// memory says nothing about leaks in a sanitizer build.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#else
constexpr bool kUnderAsan = false;
#endif

void soak(const at::Device& device) {
  if (kUnderAsan) {
    GTEST_SKIP() << "ASan's quarantine keeps freed memory resident";
  }
  c10::InferenceMode guard;
  const int64_t R = 4, B = 64, H = 64, K = 96;
  const std::string path =
      ::testing::TempDir() + "fgl_soak_" + std::to_string(::getpid()) + ".pt";
  io::write_tensor_file(path, io::Layout::kDict, {"a", "b"},
                        {at::randn({R, B, H}), at::randn({R, B / 2, H})});
  models::GatherLinear model(R, H, K);
  model->to(device);
  auto one_inference = [&] {
    const auto file = io::read_tensor_file(path);
    for (const auto& t : file.tensors) {
      const auto x = t.to(device);
      const auto out = model->forward(x);
      const auto ref = model->forward_reference(x);
      ASSERT_TRUE(at::allclose(out, ref, 1e-4, 1e-4));
    }
  };
  for (int i = 0; i < kWarmup; ++i) one_inference();
  const double before = resident_mb();
  for (int i = 0; i < kCalls; ++i) one_inference();
  const double after = resident_mb();
  std::remove(path.c_str());
  std::cout << "soak on " << device << ": " << kCalls
            << " inferences, resident " << before << " MB -> " << after
            << " MB (growth " << after - before << " MB, bound " << kMaxGrowthMb
            << " MB)\n";
  ::testing::Test::RecordProperty("rss_growth_kb",
                                  static_cast<int>((after - before) * 1024));
  EXPECT_LT(after - before, kMaxGrowthMb);
}

TEST(Soak, ResidentMemoryStaysFlatOnCpu) { soak(at::kCPU); }

// A torch.save zip whose pickle is L = [tensor, L]: `floats` float32s in
// storage record data/0, then the list appended to itself.
std::vector<char> cyclic_list_with_a_tensor(int32_t floats) {
  std::string pkl = "\x80\x02";  // PROTO 2
  const auto op = [&](const char* bytes, size_t n) { pkl.append(bytes, n); };
  const auto int32 = [&](int32_t v) {
    pkl += 'J';  // BININT, little-endian
    for (int i = 0; i < 4; ++i) pkl += static_cast<char>((v >> (8 * i)) & 255);
  };
  const auto text = [&](const std::string& s) {
    pkl += 'X';  // BINUNICODE
    for (int i = 0; i < 4; ++i) {
      pkl += static_cast<char>((s.size() >> (8 * i)) & 255);
    }
    pkl += s;
  };
  op("]q\0(", 4);  // EMPTY_LIST, BINPUT 0, MARK
  pkl += "ctorch._utils\n_rebuild_tensor_v2\n((";
  text("storage");
  pkl += "ctorch\nFloatStorage\n";
  text("0");
  text("cpu");
  int32(floats);
  pkl += "tQ";   // the persistent id, BINPERSID
  op("K\0", 2);  // storage offset 0
  int32(floats);
  pkl += "\x85K\x01\x85\x89";  // size (floats,), stride (1,), False
  pkl += "ccollections\nOrderedDict\n)RtR";  // OrderedDict(); the tensor
  op("h\0e.", 4);  // BINGET 0 (the list), APPENDS, STOP
  const std::vector<float> storage(static_cast<size_t>(floats), 1.0f);
  return torch_archive(
      {{"data.pkl", pkl},
       {"data/0", std::string(reinterpret_cast<const char*>(storage.data()),
                              storage.size() * sizeof(float))}});
}

TEST(Soak, RefusingCyclicFilesLeavesResidentMemoryFlat) {
  if (kUnderAsan) {
    GTEST_SKIP() << "ASan's quarantine keeps freed memory resident";
  }
  // 1 MiB a file: a reader that left the cycle would hold 200 MiB.
  const auto zip = cyclic_list_with_a_tensor(1 << 18);
  const auto refuse = [&] {
    try {
      io::read_torch_save(zip.data(), zip.size());
      ADD_FAILURE() << "a list inside itself was read";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("container inside itself"),
                std::string::npos)
          << e.what();
    }
  };
  for (int i = 0; i < 20; ++i) refuse();
  const double before = resident_mb();
  for (int i = 0; i < 200; ++i) refuse();
  const double after = resident_mb();
  std::cout << "200 cyclic files refused: resident " << before << " MB -> "
            << after << " MB\n";
  EXPECT_LT(after - before, kMaxGrowthMb);
}

// NOTE: "Gpu", not "Cuda": gpu_check.sh runs '*Cuda*' under compute-sanitizer,
// where 1000 inferences would take minutes; ctest runs it on the GPU machine.
TEST(Soak, ResidentMemoryStaysFlatOnGpu) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device in this process; the CPU soak runs";
  }
  soak(at::Device(at::kCUDA, 0));
}

}  // namespace
}  // namespace fgl::testing
