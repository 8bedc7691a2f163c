// Weight loading into GatherLinear (state_dict, prefixed state_dict, C++
// torch::save of the module) and the tensor files underneath it.
#include <dirent.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "fgl/io/input_file.h"
#include "fgl/io/paths.h"
#include "fgl/io/tensor_file.h"
#include "fgl/models/gather_linear_module.h"
#include "fgl/models/weights.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

using io::Layout;
using models::GatherLinear;
using models::GatherLinearOptions;

// A fresh directory per test, removed afterwards.
class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = "/tmp/fgl_weights_XXXXXX";
    ASSERT_NE(::mkdtemp(name.data()), nullptr);
    dir_ = name;
  }
  void TearDown() override {
    for (const auto& name : entries()) {
      ::unlink(path(name).c_str());
    }
    ::rmdir(dir_.c_str());
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // The files in the test's directory (not std::filesystem: see paths.h).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") {
          names.push_back(name);
        }
      }
      ::closedir(d);
    }
    return names;
  }

  std::string dir_;
};

at::Tensor randn(at::IntArrayRef sizes) {
  return random_tensor(sizes, at::kFloat, at::kCPU);
}

// A state_dict as Python's torch.save writes it: a dict name -> tensor.
void save_state_dict(const std::string& path,
                     const std::vector<std::string>& names,
                     const std::vector<at::Tensor>& tensors) {
  io::write_tensor_file(path, Layout::kDict, names, tensors);
}

void expect_loaded(const GatherLinear& model, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias) {
  EXPECT_TRUE(model->proj->weight.equal(weight));
  if (bias) {
    EXPECT_TRUE(model->proj->bias.equal(*bias));
  }
}

TEST_F(WeightsTest, LinearStateDict) {
  const auto w = randn({5, 12}), b = randn({5});
  save_state_dict(path("w.pt"), {"weight", "bias"}, {w, b});
  const auto weights = models::read_weights(path("w.pt"));
  EXPECT_EQ(weights.prefix, "");
  const auto options = models::options_for(weights, 3, 4);
  EXPECT_EQ(options.K(), 5);
  EXPECT_TRUE(options.bias());
  GatherLinear model(options);
  models::load_weights(*model, weights);
  expect_loaded(model, w, b);
}

TEST_F(WeightsTest, LinearStateDictWithoutBias) {
  const auto w = randn({5, 12});
  save_state_dict(path("w.pt"), {"weight"}, {w});
  const auto weights = models::read_weights(path("w.pt"));
  EXPECT_FALSE(models::options_for(weights, 2, 6).bias());
  GatherLinear model(GatherLinearOptions(2, 6, 5).bias(false));
  models::load_weights(*model, weights);
  expect_loaded(model, w, std::nullopt);
}

TEST_F(WeightsTest, PrefixedStateDict) {
  const auto w = randn({5, 12}), b = randn({5});
  save_state_dict(path("big.pt"),
                  {"encoder.norm.weight", "encoder.out_proj.weight",
                   "encoder.out_proj.bias"},
                  {randn({12}), w, b});
  for (const std::string prefix : {"encoder.out_proj", "encoder.out_proj."}) {
    GatherLinear model(GatherLinearOptions(3, 4, 5));
    models::load_weights(*model, path("big.pt"), prefix);
    expect_loaded(model, w, b);
  }
  // Without the prefix the file's names are listed with what to pass.
  EXPECT_TRUE(
      throws_with([&] { models::read_weights(path("big.pt")); },
                  {"has no 'weight' or 'proj.weight'",
                   "encoder.out_proj.weight [5, 12]", "--weights-prefix"}));
  EXPECT_TRUE(
      throws_with([&] { models::read_weights(path("big.pt"), "decoder"); },
                  {"has no 'decoder.weight'"}));
}

// The bytes of `path`.
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(WeightsTest, OnlyTheLayersTensorsAreRead) {
  // A checkpoint whose other entry is damaged where its bytes lie (its
  // record's local header): taking the layer never reads them, reading the
  // whole file finds the damage.
  const auto w = randn({5, 12}), b = randn({5});
  save_state_dict(path("ckpt.pt"), {"other", "weight", "bias"},
                  {randn({4096}), w, b});
  std::string bytes = file_bytes(path("ckpt.pt"));
  const size_t name = bytes.find("data/0");
  ASSERT_NE(name, std::string::npos);
  const size_t header = bytes.rfind("PK\x03\x04", name);
  ASSERT_NE(header, std::string::npos);
  bytes[header + 3] = 0x7f;
  std::ofstream(path("ckpt.pt"), std::ios::binary | std::ios::trunc) << bytes;

  const auto weights = models::read_weights(path("ckpt.pt"));
  EXPECT_TRUE(weights.weight.equal(w));
  EXPECT_TRUE(weights.bias->equal(b));
  EXPECT_ANY_THROW(io::read_tensor_file(path("ckpt.pt")));

  const auto some =
      io::read_tensor_file(path("ckpt.pt"), true, UINT64_MAX, {"weight"});
  ASSERT_EQ(some.names, std::vector<std::string>{"weight"});
  ASSERT_EQ(some.unread.size(), 2u);
  EXPECT_EQ(some.unread[0].name, "other");
  EXPECT_EQ(some.unread[0].shape, std::vector<int64_t>{4096});
}

// Every read goes through the read observer (fgl_infer's progress on long
// reads), and taking one layer reads little more than its own bytes.
TEST_F(WeightsTest, ReadsTellTheReadObserver) {
  const auto w = randn({5, 12});
  save_state_dict(path("ckpt.pt"), {"other", "weight"}, {randn({1 << 20}), w});
  struct Call {
    std::string path;
    uint64_t read, size;
  };
  std::vector<Call> calls;
  io::set_read_observer(
      [&](const std::string& p, uint64_t read, uint64_t size) {
        calls.push_back({p, read, size});
      });
  const auto all = io::read_tensor_file(path("ckpt.pt"));
  std::vector<Call> whole = calls;
  calls.clear();
  const auto some =
      io::read_tensor_file(path("ckpt.pt"), true, UINT64_MAX, {"weight"});
  io::set_read_observer(nullptr);

  ASSERT_EQ(all.tensors.size(), 2u);
  ASSERT_TRUE(some.tensors.at(0).equal(w));
  for (const auto* reads : {&whole, &calls}) {
    ASSERT_FALSE(reads->empty());
    uint64_t last = 0;
    for (const auto& c : *reads) {
      EXPECT_EQ(c.path, path("ckpt.pt"));
      EXPECT_EQ(c.size, file_bytes(path("ckpt.pt")).size());
      EXPECT_GE(c.read, last);
      last = c.read;
    }
  }
  EXPECT_GE(whole.back().read, uint64_t{4} << 20);  // the 4 MB entry
  EXPECT_LT(calls.back().read, uint64_t{1} << 20);  // never read
}

TEST_F(WeightsTest, CppTorchSaveOfTheModule) {
  GatherLinear saved(GatherLinearOptions(3, 4, 5));
  torch::save(saved, path("module.pt"));
  const auto weights = models::read_weights(path("module.pt"));
  EXPECT_EQ(weights.prefix, "proj.");
  GatherLinear model(models::options_for(weights, 3, 4));
  models::load_weights(*model, weights);
  expect_loaded(model, saved->proj->weight, saved->proj->bias);
  // The same file still loads the libtorch way.
  GatherLinear again(GatherLinearOptions(3, 4, 5));
  torch::load(again, path("module.pt"));
  expect_loaded(again, saved->proj->weight, saved->proj->bias);
}

TEST_F(WeightsTest, ShapeMismatchesSayWhichDimDisagrees) {
  save_state_dict(path("w.pt"), {"weight", "bias"},
                  {randn({5, 12}), randn({5})});
  const auto weights = models::read_weights(path("w.pt"));
  EXPECT_TRUE(throws_with([&] { models::options_for(weights, 4, 4); },
                          {"x has R=4 and H=4 (R*H=16)",
                           "but 'weight' has shape [5, 12] (K=5, R*H=12)"}));
  GatherLinear wrong_k(GatherLinearOptions(3, 4, 6));
  EXPECT_TRUE(throws_with([&] { models::load_weights(*wrong_k, weights); },
                          {"expects (K, R*H) = (6, 12)", "K differs"}));
  GatherLinear wrong_rh(GatherLinearOptions(2, 4, 5));
  EXPECT_TRUE(throws_with([&] { models::load_weights(*wrong_rh, weights); },
                          {"R*H differs"}));
  GatherLinear no_bias(GatherLinearOptions(3, 4, 5).bias(false));
  EXPECT_TRUE(throws_with([&] { models::load_weights(*no_bias, weights); },
                          {"built without a bias but the weights have one"}));
}

TEST_F(WeightsTest, MisshapenTensorsInTheFile) {
  save_state_dict(path("rank.pt"), {"weight"}, {randn({5, 12, 1})});
  EXPECT_TRUE(throws_with([&] { models::read_weights(path("rank.pt")); },
                          {"weight must be 2-D (K, R*H)", "[5, 12, 1]"}));
  save_state_dict(path("bias.pt"), {"weight", "bias"},
                  {randn({5, 12}), randn({4})});
  EXPECT_TRUE(throws_with([&] { models::read_weights(path("bias.pt")); },
                          {"bias must be 1-D of length K = 5", "[4]"}));
}

TEST_F(WeightsTest, TensorFilesRoundTripInEveryLayout) {
  const std::vector<at::Tensor> tensors{randn({2, 3, 4}), randn({2, 1, 4})};
  for (const auto layout : {Layout::kList, Layout::kTuple, Layout::kDict}) {
    SCOPED_TRACE(io::to_string(layout));
    io::write_tensor_file(path("t.pt"), layout, {"a", "b"}, tensors);
    const auto file = io::read_tensor_file(path("t.pt"));
    EXPECT_EQ(file.layout, layout);
    EXPECT_EQ(file.format, io::FileFormat::kTorchSave);
    ASSERT_EQ(file.tensors.size(), 2u);
    EXPECT_TRUE(file.tensors[1].equal(tensors[1]));
    EXPECT_EQ(file.names[0], layout == Layout::kDict ? "a" : "0");
  }
  io::write_tensor_file(path("t.pt"), Layout::kTensor, {"x"}, {tensors[0]});
  EXPECT_EQ(io::read_tensor_file(path("t.pt")).layout, Layout::kTensor);
  // C++ torch::save of a tensor reads back as that tensor.
  torch::save(tensors[0], path("cpp.pt"));
  const auto cpp = io::read_tensor_file(path("cpp.pt"));
  EXPECT_EQ(cpp.format, io::FileFormat::kTorchScript);
  EXPECT_EQ(cpp.layout, Layout::kTensor);
  EXPECT_TRUE(cpp.tensors[0].equal(tensors[0]));
}

TEST_F(WeightsTest, FailedWritesLeaveNoFile) {
  const auto target = path("missing_dir/y.pt");
  EXPECT_TRUE(throws_with(
      [&] {
        io::write_tensor_file(target, Layout::kTensor, {"x"}, {randn({2})});
      },
      {"cannot create a file in"}));
  EXPECT_FALSE(io::path_exists(target));
  EXPECT_TRUE(entries().empty());
}

TEST_F(WeightsTest, WritesReplaceOnlyRegularFiles) {
  // A symbolic link at the target stays a link (and its target untouched),
  // where rename would have replaced it by a regular file.
  { std::ofstream(path("kept.pt")) << "keep"; }
  ASSERT_EQ(::symlink(path("kept.pt").c_str(), path("link.pt").c_str()), 0);
  EXPECT_TRUE(throws_with(
      [&] {
        io::write_tensor_file(path("link.pt"), Layout::kTensor, {"x"},
                              {randn({2})});
      },
      {"not replacing", "link.pt", "not a regular file"}));
  EXPECT_TRUE(io::is_special_file(path("link.pt")));
  EXPECT_EQ(io::file_size(path("kept.pt")), 4);
  EXPECT_EQ(entries().size(), 2u);  // no temporary file left
  // A regular file is replaced.
  io::write_tensor_file(path("kept.pt"), Layout::kTensor, {"x"}, {randn({2})});
  EXPECT_FALSE(io::is_special_file(path("kept.pt")));
  EXPECT_TRUE(io::same_file(path("link.pt"), path("kept.pt")));
}

TEST_F(WeightsTest, UnreadableFiles) {
  EXPECT_TRUE(throws_with([&] { io::read_tensor_file(path("none.pt")); },
                          {"cannot open"}));
  { std::ofstream(path("empty.pt")); }
  EXPECT_TRUE(throws_with([&] { io::read_tensor_file(path("empty.pt")); },
                          {"is empty"}));
  { std::ofstream(path("text.pt")) << "not a tensor file"; }
  EXPECT_TRUE(throws_with([&] { io::read_tensor_file(path("text.pt")); },
                          {"is not a PyTorch zip file"}));
}

}  // namespace
}  // namespace fgl::testing
