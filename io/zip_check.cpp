#include "fgl/io/zip_check.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace fgl::io {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;       // end of central dir
constexpr uint32_t kZip64EndSignature = 0x06064b50;  // zip64 end record
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kEntrySignature = 0x02014b50;  // central dir entry
constexpr size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56;
constexpr size_t kEntrySize = 46;
constexpr uint64_t kMaxDirectoryBytes = uint64_t{64} << 20;
constexpr uint64_t kDeflateMaxRatio = 1032;

[[noreturn]] void fail(const std::string& what) {
  throw ZipError("zip: " + what);
}

uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::vector<unsigned char> read_exactly(const ReadAt& read, uint64_t offset,
                                        uint64_t n, uint64_t file_size) {
  if (offset > file_size || n > file_size - offset) {
    fail("a directory record points past the end of the file");
  }
  std::vector<unsigned char> out(n);
  if (n > 0 && read(offset, out.data(), n) != n) {
    fail("cannot read the central directory");
  }
  return out;
}

struct Directory {
  uint64_t entries = 0, size = 0, offset = 0;
};

Directory find_directory(const ReadAt& read, uint64_t file_size) {
  if (file_size < kEndSize) fail("the file is too short for a zip archive");
  // The end record is in the last 22 + 65535 (comment) bytes; the last
  // signature wins, as in miniz.
  const uint64_t tail_size = std::min<uint64_t>(file_size, kEndSize + 65535);
  const uint64_t tail_start = file_size - tail_size;
  const auto tail = read_exactly(read, tail_start, tail_size, file_size);
  for (uint64_t i = tail_size - kEndSize + 1; i-- > 0;) {
    const unsigned char* p = tail.data() + i;
    if (le(p, 4) != kEndSignature) continue;
    Directory d{le(p + 10, 2), le(p + 12, 4), le(p + 16, 4)};
    const uint64_t end_at = tail_start + i;
    if (d.entries == 0xffff || d.size == 0xffffffff || d.offset == 0xffffffff) {
      if (end_at < kLocatorSize) fail("a zip64 archive without its locator");
      const auto loc =
          read_exactly(read, end_at - kLocatorSize, kLocatorSize, file_size);
      if (le(loc.data(), 4) != kZip64LocatorSignature) {
        fail("a zip64 archive without its locator");
      }
      const auto end64 =
          read_exactly(read, le(loc.data() + 8, 8), kZip64EndSize, file_size);
      if (le(end64.data(), 4) != kZip64EndSignature) {
        fail("a zip64 archive without its end record");
      }
      d = Directory{le(end64.data() + 32, 8), le(end64.data() + 40, 8),
                    le(end64.data() + 48, 8)};
    }
    return d;
  }
  fail("no end of central directory record (not a zip file, or truncated)");
}

// The zip64 extra field (id 1) holds, in order, the 64-bit values of the
// 32-bit fields that are 0xffffffff.
void apply_zip64(const unsigned char* extra, size_t n, uint64_t& uncompressed,
                 uint64_t& compressed, uint64_t& offset) {
  size_t at = 0;
  while (at + 4 <= n) {
    const uint64_t id = le(extra + at, 2), len = le(extra + at + 2, 2);
    const unsigned char* v = extra + at + 4;
    if (at + 4 + len > n) fail("a directory entry's extra field overruns it");
    if (id == 1) {
      size_t k = 0;
      for (uint64_t* field : {&uncompressed, &compressed, &offset}) {
        if (*field != 0xffffffff) continue;
        if (k + 8 > len) fail("a zip64 field is missing from an entry");
        *field = le(v + k, 8);
        k += 8;
      }
    }
    at += 4 + len;
  }
}

}  // namespace

std::vector<std::string> check_zip_directory(const ReadAt& read,
                                             uint64_t file_size,
                                             uint64_t max_expanded) {
  const Directory d = find_directory(read, file_size);
  std::vector<std::string> names;
  uint64_t expanded = 0;
  if (d.size > kMaxDirectoryBytes) {
    fail("the central directory of " + std::to_string(d.size) +
         " bytes exceeds the limit of " + std::to_string(kMaxDirectoryBytes));
  }
  const auto dir = read_exactly(read, d.offset, d.size, file_size);
  size_t at = 0;
  for (uint64_t i = 0; i < d.entries; ++i) {
    if (at + kEntrySize > dir.size() ||
        le(dir.data() + at, 4) != kEntrySignature) {
      fail("the central directory is damaged");
    }
    const unsigned char* e = dir.data() + at;
    const uint64_t method = le(e + 10, 2);
    uint64_t compressed = le(e + 20, 4), uncompressed = le(e + 24, 4),
             offset = le(e + 42, 4);
    const size_t name = le(e + 28, 2), extra = le(e + 30, 2),
                 comment = le(e + 32, 2);
    if (at + kEntrySize + name + extra + comment > dir.size()) {
      fail("the central directory is damaged");
    }
    apply_zip64(e + kEntrySize + name, extra, uncompressed, compressed, offset);
    names.emplace_back(reinterpret_cast<const char*>(e + kEntrySize), name);
    const std::string record = names.back().substr(0, 64);
    const uint64_t most = method == 0 ? file_size
                          : compressed > file_size
                              ? 0
                              : compressed * kDeflateMaxRatio;
    if (compressed > file_size || offset > file_size || uncompressed > most) {
      fail("record '" + record + "' declares " + std::to_string(uncompressed) +
           " bytes at offset " + std::to_string(offset) + " in a file of " +
           std::to_string(file_size) + " bytes");
    }
    expanded += uncompressed;  // each at most 1032 x the file: no overflow
    if (expanded > max_expanded) {
      fail("its records expand to more than " + std::to_string(max_expanded) +
           " bytes (the limit)");
    }
    at += kEntrySize + name + extra + comment;
  }
  return names;
}

std::vector<std::string> check_zip_directory(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  return check_zip_directory(
      [&](uint64_t offset, void* out, size_t n) -> size_t {
        if (offset >= size) return 0;
        n = std::min<uint64_t>(n, size - offset);
        std::memcpy(out, bytes + offset, n);
        return n;
      },
      size);
}

void check_torch_archive_names(const std::vector<std::string>& names) {
  if (names.empty()) fail("the archive holds no records");
  const auto slash = names[0].find('/');
  if (slash == std::string::npos) {
    fail("its first record, '" + names[0].substr(0, 64) +
         "', is not in a folder, as every record torch.save writes is");
  }
  const auto lower = [](std::string s) {
    for (char& c : s) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return s;
  };
  const std::string folder = lower(names[0].substr(0, slash + 1));
  for (const auto& name : names) {
    const std::string n = lower(name);
    if (n == folder + "version" || n == folder + ".data/version") return;
  }
  fail("no record '" + names[0].substr(0, slash + 1).substr(0, 64) +
       "version', which torch.save and torch.jit.save write");
}

}  // namespace fgl::io
