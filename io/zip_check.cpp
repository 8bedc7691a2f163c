#include "fgl/io/zip_check.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

namespace fgl::io {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;       // end of central dir
constexpr uint32_t kZip64EndSignature = 0x06064b50;  // zip64 end record
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kEntrySignature = 0x02014b50;  // central dir entry
constexpr uint32_t kLocalSignature = 0x04034b50;  // a record's own header
constexpr size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56;
constexpr size_t kEntrySize = 46, kLocalHeaderSize = 30;
constexpr uint32_t kDosFolderAttribute = 0x10;  // of the external attributes
constexpr uint64_t kMaxDirectoryBytes = uint64_t{64} << 20;
constexpr uint64_t kDeflateMaxRatio = 1032;

[[noreturn]] void fail(const std::string& what) {
  throw ZipError("zip: " + what);
}

// A record's name as the messages show it: quoted, its first 64 bytes.
std::string quoted(const std::string& name) {
  return "'" + name.substr(0, 64) + "'";
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

std::vector<ZipRecord> check_zip_directory(const ReadAt& read,
                                           uint64_t file_size,
                                           uint64_t max_expanded) {
  const Directory d = find_directory(read, file_size);
  std::vector<ZipRecord> records;
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
    ZipRecord r;
    r.method = le(e + 10, 2);
    r.compressed = le(e + 20, 4);
    r.uncompressed = le(e + 24, 4);
    r.offset = le(e + 42, 4);
    const size_t name = le(e + 28, 2), extra = le(e + 30, 2),
                 comment = le(e + 32, 2);
    if (at + kEntrySize + name + extra + comment > dir.size()) {
      fail("the central directory is damaged");
    }
    apply_zip64(e + kEntrySize + name, extra, r.uncompressed, r.compressed,
                r.offset);
    r.name.assign(reinterpret_cast<const char*>(e + kEntrySize), name);
    // miniz hands out nothing for a folder, leaving the reader's buffer of
    // the declared size as it was: memory never written, read as data.
    const bool folder = (!r.name.empty() && r.name.back() == '/') ||
                        (le(e + 38, 4) & kDosFolderAttribute) != 0;
    if (folder && (r.compressed > 0 || r.uncompressed > 0)) {
      fail("record " + quoted(r.name) + " is marked a folder yet declares " +
           std::to_string(r.uncompressed) + " bytes");
    }
    const uint64_t most = r.method == 0 ? file_size
                          : r.compressed > file_size
                              ? 0
                              : r.compressed * kDeflateMaxRatio;
    if (r.compressed > file_size || r.offset > file_size ||
        r.uncompressed > most) {
      fail("record " + quoted(r.name) + " declares " +
           std::to_string(r.uncompressed) + " bytes at offset " +
           std::to_string(r.offset) + " in a file of " +
           std::to_string(file_size) + " bytes");
    }
    expanded += r.uncompressed;  // each at most 1032 x the file: no overflow
    if (expanded > max_expanded) {
      fail("its records expand to more than " + std::to_string(max_expanded) +
           " bytes (the limit)");
    }
    records.push_back(std::move(r));
    at += kEntrySize + name + extra + comment;
  }
  return records;
}

ReadAt read_bytes(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  return [bytes, size](uint64_t offset, void* out, size_t n) -> size_t {
    if (offset >= size) return 0;
    n = std::min<uint64_t>(n, size - offset);
    std::memcpy(out, bytes + offset, n);
    return n;
  };
}

void check_torch_archive(const ReadAt& read, uint64_t file_size,
                         const std::vector<ZipRecord>& records,
                         const TorchVersions& versions) {
  if (records.empty()) fail("the archive holds no records");
  const std::string& first = records[0].name;
  const auto slash = first.find('/');
  if (slash == std::string::npos) {
    fail("its first record, " + quoted(first) +
         ", is not in a folder, as every record torch.save writes is");
  }
  const std::string folder = first.substr(0, slash + 1);
  const auto lower = [](std::string s) {
    for (char& c : s) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return s;
  };
  // The records of the folder named `name`, as miniz finds them.
  const auto named = [&](const std::string& name) {
    std::vector<const ZipRecord*> found;
    const std::string want = lower(folder + name);
    for (const auto& r : records) {
      if (lower(r.name) == want) found.push_back(&r);
    }
    return found;
  };
  // What miniz checks of a record before it hands out its bytes; the
  // bytes of a stored one.
  const auto stored_bytes = [&](const ZipRecord& r) {
    const auto damaged = [&] {
      fail("record " + quoted(r.name) + " has a damaged local header");
    };
    if (r.offset > file_size || kLocalHeaderSize > file_size - r.offset) {
      damaged();
    }
    const auto header =
        read_exactly(read, r.offset, kLocalHeaderSize, file_size);
    const uint64_t data =
        r.offset + kLocalHeaderSize + le(&header[26], 2) + le(&header[28], 2);
    if (le(header.data(), 4) != kLocalSignature || data > file_size ||
        r.compressed > file_size - data) {
      damaged();
    }
    return r.method == 0 ? read_exactly(read, data, r.compressed, file_size)
                         : std::vector<unsigned char>();
  };
  for (const ZipRecord* r : named(".data/serialization_id")) stored_bytes(*r);
  auto version = named(".data/version");
  if (version.empty()) version = named("version");
  if (version.empty()) {
    fail("no record '" + folder.substr(0, 64) +
         "version', which torch.save and torch.jit.save write");
  }
  for (const ZipRecord* r : version) {
    const auto bytes = stored_bytes(*r);
    if (r->method != 0) continue;  // read by libtorch alone
    // As std::stoull reads it: spaces, a sign, digits, anything after.
    size_t at = 0;
    while (at < bytes.size() && std::isspace(bytes[at])) ++at;
    const bool negative = at < bytes.size() && bytes[at] == '-';
    if (at < bytes.size() && (bytes[at] == '+' || bytes[at] == '-')) ++at;
    const size_t digits_at = at;
    uint64_t value = 0;
    bool overflow = false;
    for (; at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9'; ++at) {
      const uint64_t digit = bytes[at] - '0';
      overflow = overflow || value > (UINT64_MAX - digit) / 10;
      value = value * 10 + digit;
    }
    if (at == digits_at || negative || overflow || value < versions.min ||
        value > versions.max) {
      fail("record " + quoted(r->name) +
           " does not hold a file format version from " +
           std::to_string(versions.min) + " to " +
           std::to_string(versions.max));
    }
  }
}

}  // namespace fgl::io
