#include "adapters/snapshot/tar.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

namespace iommud::adapters::snapshot {
namespace {

constexpr size_t kBlock = 512;

void putOctal(char* field, size_t width, unsigned long long value) {
  // width - 1 octal digits, zero-padded, then NUL (width includes the terminator).
  field[width - 1] = '\0';
  for (size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7U));
    value >>= 3U;
  }
}

// Tar fields are fixed-width and need no terminator when full.
void putString(char* field, size_t width, const std::string& s) {
  std::copy_n(s.data(), std::min(width, s.size()), field);
}

std::string header(const std::string& name, const std::string& prefix, char type, unsigned mode, size_t size,
                   const std::string& link, long long mtime) {
  std::array<char, kBlock> h{};
  putString(h.data(), 100, name);
  putOctal(&h[100], 8, mode);
  putOctal(&h[108], 8, 0);
  putOctal(&h[116], 8, 0);
  putOctal(&h[124], 12, size);
  putOctal(&h[136], 12, static_cast<unsigned long long>(mtime));
  h[156] = type;
  putString(&h[157], 100, link);
  std::memcpy(&h[257], "ustar", 6);
  std::memcpy(&h[263], "00", 2);
  putString(&h[265], 32, "root");
  putString(&h[297], 32, "root");
  putString(&h[345], 155, prefix);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  putOctal(&h[148], 7, sum);  // six digits, NUL, then the space already there

  return {h.data(), h.size()};
}

void pad(std::string& out) {
  out.append((kBlock - out.size() % kBlock) % kBlock, '\0');
}

// A GNU long-name ('L') or long-link ('K') record carrying a value that does not fit.
void longRecord(std::string& out, char type, const std::string& value, long long mtime) {
  out += header("././@LongLink", "", type, 0644, value.size() + 1, "", mtime);
  out += value;
  out += '\0';
  pad(out);
}

// ustar: where to split a long path at a '/' so that name <= 100 and prefix <= 155 bytes, or npos.
size_t ustarCut(const std::string& path) {
  for (size_t i = path.find('/'); i <= 155; i = path.find('/', i + 1)) {  // npos > 155
    const size_t rest = path.size() - i - 1;                              // the name part; never empty
    if (rest > 0 && rest <= 100) return i;
  }
  return std::string::npos;
}

}  // namespace

std::string encodeTar(const std::vector<TarEntry>& entries, long long mtime) {
  std::string out;
  for (const auto& e : entries) {
    std::string path = e.kind == TarEntry::Kind::Dir ? e.path + "/" : e.path;
    std::string name = path;
    std::string prefix;
    if (path.size() > 100) {
      const size_t cut = ustarCut(path);
      if (cut != std::string::npos) {
        prefix = path.substr(0, cut);
        name = path.substr(cut + 1);
      } else {
        longRecord(out, 'L', path, mtime);
        name = path.substr(0, 100);
      }
    }
    std::string link;
    if (e.kind == TarEntry::Kind::Symlink) {
      link = e.data;
      if (link.size() > 100) longRecord(out, 'K', link, mtime);
    }
    char type = e.kind == TarEntry::Kind::File ? '0' : e.kind == TarEntry::Kind::Dir ? '5' : '2';
    size_t size = e.kind == TarEntry::Kind::File ? e.data.size() : 0;
    out += header(name, prefix, type, e.kind == TarEntry::Kind::Dir ? 0755 : e.mode, size, link, mtime);
    if (e.kind == TarEntry::Kind::File) {
      out += e.data;
      pad(out);
    }
  }
  out.append(2 * kBlock, '\0');
  return out;
}

}  // namespace iommud::adapters::snapshot
