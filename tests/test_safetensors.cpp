// The safetensors reader: well-formed files give their tensors in file order,
// and every malformed header is refused, by message, before any allocation.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "fgl/io/input_file.h"
#include "fgl/io/safetensors_file.h"
#include "fgl/io/safetensors_header.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

using io::parse_safetensors;
using io::SafetensorsError;

// The file: 8-byte little-endian header length, the header, the data.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) {
    out[i] = static_cast<char>(n & 0xff);
  }
  return out + header + data;
}

std::vector<io::SafetensorsEntry> parse(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const unsigned char*>(bytes.data()),
                           bytes.size());
}

::testing::AssertionResult refused_with(const std::string& bytes,
                                        const std::string& part) {
  try {
    parse(bytes);
  } catch (const SafetensorsError& e) {
    if (std::string(e.what()).find(part) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "message lacks \"" << part << "\": " << e.what();
  }
  return ::testing::AssertionFailure() << "accepted";
}

TEST(SafetensorsHeader, EntriesInFileOrder) {
  const auto entries = parse(
      file_bytes(R"({"__metadata__":{"format":"pt"},)"
                 R"("w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
                 R"("b":{"dtype":"F64","shape":[],"data_offsets":[12,20]},)"
                 R"("e":{"dtype":"F32","shape":[0,4],"data_offsets":[20,20]}})",
                 std::string(20, '\0')));
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "w");
  EXPECT_EQ(entries[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(entries[1].name, "b");
  EXPECT_TRUE(entries[1].shape.empty());
  EXPECT_EQ(entries[2].end, 20u);
}

TEST(SafetensorsHeader, MalformedFilesAreRefused) {
  const std::string data(16, '\0');
  auto one = [&](const std::string& entry) {
    return file_bytes("{\"t\":" + entry + "}", data);
  };
  EXPECT_TRUE(refused_with("", "shorter than the 8-byte header length"));
  EXPECT_TRUE(
      refused_with(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10),
                   "exceeds the limit"));
  EXPECT_TRUE(refused_with(file_bytes("{}", "").substr(0, 9),
                           "exceeds the 1 bytes after it"));
  EXPECT_TRUE(refused_with(file_bytes("{\"t\":", data), "not valid JSON"));
  EXPECT_TRUE(refused_with(file_bytes("[1,2]", data), "not a JSON object"));
  EXPECT_TRUE(refused_with(one("3"), "entry 't' is not an object"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"I32","shape":[8],"data_offsets":[0,16]})"),
                   "has 16 data bytes, but its shape and dtype need 32"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"Q4","shape":[4],"data_offsets":[0,32]})"),
                   "outside the 16 data bytes"));
  EXPECT_TRUE(refused_with(one(R"({"shape":[4],"data_offsets":[0,16]})"),
                           "no dtype string"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})"),
                   "not a size"));
  EXPECT_TRUE(refused_with(
      one(R"({"dtype":"F32","shape":[4.5],"data_offsets":[0,16]})"),
      "not a size"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[4294967296,4294967296,16],)"
                       R"("data_offsets":[0,16]})"),
                   "overflows"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[4611686018427387904],)"
                       R"("data_offsets":[0,16]})"),
                   "need more than 2^64"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[4]})"), "no data_offsets"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,-16]})"),
                   "no data_offsets"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[8],"data_offsets":[0,32]})"),
                   "outside the 16 data bytes"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[4],"data_offsets":[16,0]})"),
                   "outside the 16 data bytes"));
  EXPECT_TRUE(
      refused_with(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})"),
                   "has 16 data bytes, but its shape and dtype need 12"));
  EXPECT_TRUE(refused_with(
      file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                 data),
      "overlap"));
}

TEST(SafetensorsFile, ReadsTensorsOntoTheCpu) {
  const auto w = at::randn({3, 4}).to(at::kBFloat16);
  const auto b = at::randn({3}).to(at::kHalf);
  std::string data(static_cast<const char*>(w.data_ptr()), w.nbytes());
  data.append(static_cast<const char*>(b.data_ptr()), b.nbytes());
  const std::string path = ::testing::TempDir() + "fgl_test.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out << file_bytes(
        R"({"weight":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,24]},)"
        R"("bias":{"dtype":"F16","shape":[3],"data_offsets":[24,30]}})",
        data);
  }
  const auto file = io::read_safetensors(io::InputFile(path));
  std::remove(path.c_str());
  ASSERT_EQ(file.names, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_TRUE(at::equal(file.tensors[0], w));
  EXPECT_TRUE(at::equal(file.tensors[1], b));
}

// Checkpoints hold more than float tensors (int64 position ids, float8
// weights, ...): every dtype of the format is read as itself, and an entry
// of a dtype fgl does not know is skipped, not a reason to refuse the file.
TEST(SafetensorsFile, ReadsEveryDtypeAndSkipsUnknownOnes) {
  const auto ids = at::arange(5, at::kLong);
  const auto scale = at::randn({4}).to(at::kFloat8_e4m3fn);
  std::string data(static_cast<const char*>(ids.data_ptr()), ids.nbytes());
  data.append(static_cast<const char*>(scale.data_ptr()), scale.nbytes());
  data.append(6, '\x11');  // a packed tensor of some newer format
  const std::string path = ::testing::TempDir() + "fgl_mixed.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out << file_bytes(
        R"({"ids":{"dtype":"I64","shape":[5],"data_offsets":[0,40]},)"
        R"("scale":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[40,44]},)"
        R"("packed":{"dtype":"Q4_K","shape":[12],"data_offsets":[44,50]}})",
        data);
  }
  const auto file = io::read_safetensors(io::InputFile(path));
  std::remove(path.c_str());
  ASSERT_EQ(file.names, (std::vector<std::string>{"ids", "scale"}));
  EXPECT_TRUE(at::equal(file.tensors[0], ids));
  EXPECT_EQ(file.tensors[1].scalar_type(), at::kFloat8_e4m3fn);
  EXPECT_TRUE(
      at::equal(file.tensors[1].view(at::kByte), scale.view(at::kByte)));
  EXPECT_EQ(file.skipped, (std::vector<std::string>{"packed (dtype Q4_K)"}));
}

TEST(SafetensorsFile, ErrorsNameTheFile) {
  const std::string path = ::testing::TempDir() + "fgl_bad.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out << file_bytes(
        R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "short");
  }
  EXPECT_TRUE(throws_with([&] { io::read_safetensors(io::InputFile(path)); },
                          {path, "outside the 5 data bytes"}));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fgl::testing
