// The zip checks run before libtorch's PyTorchStreamReader sees a file
// (io/zip_check.h): the records' names, read from the central directory,
// and the names a torch.save archive needs, whose absence makes that
// reader's constructor throw past what it allocated.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fgl/io/zip_check.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

using Names = std::vector<std::string>;

TEST(ZipCheck, ReadsTheRecordsNamesInTheDirectorysOrder) {
  const auto zip = torch_archive(
      {{"data.pkl", std::string("\x80\x02N.", 4)}, {"data/0", "abcd"}});
  const Names names = io::check_zip_directory(zip.data(), zip.size());
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "archive/data.pkl");
  EXPECT_EQ(names[1], "archive/data/0");
  EXPECT_NO_THROW(io::check_torch_archive_names(names));
}

TEST(ZipCheck, TakesTheNamesOfTorchSaveArchives) {
  EXPECT_NO_THROW(io::check_torch_archive_names(
      {"x/data.pkl", "x/byteorder", "x/data/0", "x/version"}));
  // torch.jit.save from format version 6 on; miniz ignores case.
  EXPECT_NO_THROW(io::check_torch_archive_names(
      {"model/data.pkl", "model/code/__torch__.py", "model/.data/version"}));
  EXPECT_NO_THROW(io::check_torch_archive_names({"A/data.pkl", "a/VERSION"}));
}

TEST(ZipCheck, RefusesNamesPyTorchStreamReaderWouldRefuse) {
  const auto refused =
      [](const Names& names,
         const std::string& message) -> ::testing::AssertionResult {
    try {
      io::check_torch_archive_names(names);
    } catch (const io::ZipError& e) {
      if (std::string(e.what()).find(message) != std::string::npos) {
        return ::testing::AssertionSuccess();
      }
      return ::testing::AssertionFailure() << "message: " << e.what();
    }
    return ::testing::AssertionFailure() << "accepted";
  };
  EXPECT_TRUE(refused({}, "holds no records"));
  EXPECT_TRUE(refused({"data.pkl", "x/version"},
                      "first record, 'data.pkl', is not in a folder"));
  EXPECT_TRUE(refused({"x/data.pkl", "x/data/0"}, "no record 'x/version'"));
  // The version of another folder, or one level down, is not this one's.
  EXPECT_TRUE(refused({"x/data.pkl", "y/version"}, "no record 'x/version'"));
  EXPECT_TRUE(
      refused({"x/data.pkl", "x/sub/version"}, "no record 'x/version'"));
}

}  // namespace
}  // namespace fgl::testing
