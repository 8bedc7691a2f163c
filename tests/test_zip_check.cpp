// The zip checks run before libtorch's PyTorchStreamReader sees a file
// (io/zip_check.h): the records of the central directory, and what that
// reader's constructor needs of them, since it throws past what it
// allocated where they are missing or damaged.
#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fgl/io/torch_save_format.h"
#include "fgl/io/zip_check.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

constexpr io::TorchVersions kVersions{1, 10};

std::vector<char> archive_with(const std::string& name,
                               const std::string& bytes) {
  return torch_archive(
      {{"data.pkl", std::string("\x80\x02N.", 4)}, {name, bytes}});
}

// check_torch_archive's message on `zip`, or on `records` claimed of it;
// none where it takes the archive.
std::optional<std::string> refusal(const std::vector<char>& zip,
                                   std::vector<io::ZipRecord> records) {
  const io::ReadAt read = io::read_bytes(zip.data(), zip.size());
  if (records.empty()) records = io::check_zip_directory(read, zip.size());
  try {
    io::check_torch_archive(read, zip.size(), records, kVersions);
  } catch (const io::ZipError& e) {
    return e.what();
  }
  return std::nullopt;
}

::testing::AssertionResult refused(const std::vector<char>& zip,
                                   const std::string& message,
                                   std::vector<io::ZipRecord> records = {}) {
  const auto why = refusal(zip, std::move(records));
  if (!why) return ::testing::AssertionFailure() << "accepted";
  if (why->find(message) == std::string::npos) {
    return ::testing::AssertionFailure() << "message: " << *why;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult accepted(const std::vector<char>& zip,
                                    std::vector<io::ZipRecord> records = {}) {
  const auto why = refusal(zip, std::move(records));
  if (why) return ::testing::AssertionFailure() << "refused: " << *why;
  return ::testing::AssertionSuccess();
}

TEST(ZipCheck, ReadsTheRecordsInTheDirectorysOrder) {
  const auto zip = archive_with("data/0", "abcd");
  const auto records = io::check_zip_directory(
      io::read_bytes(zip.data(), zip.size()), zip.size());
  ASSERT_GE(records.size(), 3u);
  EXPECT_EQ(records[0].name, "archive/data.pkl");
  EXPECT_EQ(records[1].name, "archive/data/0");
  EXPECT_EQ(records[1].method, 0u);
  EXPECT_EQ(records[1].uncompressed, 4u);
  EXPECT_TRUE(accepted(zip));  // a torch.save archive passes
}

TEST(ZipCheck, TakesTheVersionsPyTorchStreamReaderTakes) {
  for (const std::string version : {"3\n", "10", " +7\n", "1abc"}) {
    EXPECT_TRUE(accepted(archive_with("version", version)))
        << "'" << version << "'";
  }
  // .data/version is read first, and alone.
  const auto zip = torch_archive({{"data.pkl", std::string("\x80\x02N.", 4)},
                                  {".data/version", "6\n"},
                                  {"version", "junk"}});
  EXPECT_TRUE(accepted(zip));
}

TEST(ZipCheck, RefusesWhatPyTorchStreamReaderWouldThrowOn) {
  const std::string not_a_version = "does not hold a file format version";
  for (const std::string version :
       {"abc", "", "0", "11", "-3", "99999999999999999999999"}) {
    EXPECT_TRUE(refused(archive_with("version", version), not_a_version))
        << "'" << version << "'";
  }
  const auto zip = archive_with("data/0", "abcd");
  auto records = io::check_zip_directory(io::read_bytes(zip.data(), zip.size()),
                                         zip.size());
  EXPECT_TRUE(refused(zip, "is not in a folder", {io::ZipRecord{}}));
  auto renamed = records;
  renamed[0].name = "data.pkl";
  EXPECT_TRUE(
      refused(zip, "first record, 'data.pkl', is not in a folder", renamed));
  // Without the version records (and miniz's names ignore case).
  auto unversioned = records;
  for (auto& r : unversioned) {
    if (r.name.find("version") != std::string::npos) r.name = "archive/other";
  }
  EXPECT_TRUE(refused(zip, "no record 'archive/version'", unversioned));
  auto shouting = records;
  for (auto& r : shouting) {
    for (char& c : r.name) c = static_cast<char>(std::toupper(c));
  }
  EXPECT_TRUE(accepted(zip, shouting));
  // A local header that is not one, or past the file.
  int ids = 0;
  for (auto& r : records) {
    if (r.name.find("serialization_id") == std::string::npos) continue;
    ++ids;
    auto damaged = zip;
    damaged[r.offset] = 'X';
    EXPECT_TRUE(refused(damaged, "has a damaged local header"));
    auto moved = records;
    for (auto& m : moved) {
      if (m.name == r.name) m.offset = zip.size() - 4;
    }
    EXPECT_TRUE(refused(zip, "has a damaged local header", moved));
  }
  EXPECT_EQ(ids, 1);  // PyTorchStreamWriter writes one
}

// Where miniz sees a folder it writes nothing, and libtorch's reader hands
// out its buffer of the declared size as the record's bytes: for a
// storage, memory that was never written, as tensor data.
TEST(ZipCheck, RefusesAFolderThatDeclaresBytes) {
  auto zip = archive_with("data/0", std::string(256, '\1'));
  // The directory entry of data/0: its external attributes at byte 38.
  size_t at = 0;
  for (size_t i = 0; i + 46 < zip.size(); ++i) {
    if (std::string(zip.data() + i, 4) == "PK\x01\x02" &&
        std::string(zip.data() + i + 46, 14) == "archive/data/0") {
      at = i;
    }
  }
  ASSERT_GT(at, 0u);
  zip[at + 38] |= 0x10;  // the DOS folder attribute
  try {
    io::check_zip_directory(io::read_bytes(zip.data(), zip.size()), zip.size());
    ADD_FAILURE() << "a folder with bytes was accepted";
  } catch (const io::ZipError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "record 'archive/data/0' is marked a folder yet declares "
                  "256 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(throws_with([&] { io::read_torch_save(zip.data(), zip.size()); },
                          {"is marked a folder"}));
}

TEST(ZipCheck, TheReaderRefusesABadVersionItself) {
  const auto zip = archive_with("version", "abc");
  EXPECT_TRUE(throws_with([&] { io::read_torch_save(zip.data(), zip.size()); },
                          {"record 'archive/version' does not hold a file "
                           "format version from 1 to"}));
}

}  // namespace
}  // namespace fgl::testing
