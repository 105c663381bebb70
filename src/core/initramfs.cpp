#include "core/initramfs.hpp"

#include <array>

#include "core/text.hpp"

namespace iommud::core {

namespace {

// The module name of a path below the release's module directory, or "" when it is not one.
std::string moduleOf(std::string_view path, std::string_view release) {
  // lsinitramfs prints "usr/lib/modules/...", cpio listings may start with "./" or "/"; Debian 12
  // and Fedora keep modules in usr/lib, older images in lib.
  if (release.empty()) return "";
  std::string_view rest = path;
  if (rest.starts_with("./")) {
    rest.remove_prefix(2);
  } else if (rest.starts_with('/')) {
    rest.remove_prefix(1);
  }
  if (rest.starts_with("usr/")) rest.remove_prefix(4);
  constexpr std::string_view kModules = "lib/modules/";
  if (!rest.starts_with(kModules)) return "";
  rest.remove_prefix(kModules.size());
  if (!rest.starts_with(release) || rest.size() <= release.size() || rest[release.size()] != '/') return "";
  std::string_view file = rest.substr(rest.rfind('/') + 1);
  for (std::string_view suffix : std::array<std::string_view, 4>{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}) {
    if (file.size() > suffix.size() && file.ends_with(suffix)) {
      return canonicalModuleName(file.substr(0, file.size() - suffix.size()));
    }
  }
  return "";
}

}  // namespace

InitramfsListing parseInitramfsListing(std::string_view listing, std::string_view release) {
  InitramfsListing out;
  for (std::string_view line : split(listing, '\n')) {
    auto fields = words(line);
    if (fields.empty()) continue;
    ++out.entries;
    // lsinitrd's long lines end in the path, or in "path -> target" for a link: a link is no module.
    std::string_view path = fields.back();
    if (fields.size() >= 3 && fields[fields.size() - 2] == "->") continue;
    if (std::string name = moduleOf(path, release); !name.empty()) out.modules.insert(std::move(name));
  }
  return out;
}

std::string canonicalModuleName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

std::string initramfsRebuildCommand(Initramfs::Generator generator, std::string_view release) {
  switch (generator) {
    case Initramfs::Generator::UpdateInitramfs: return "update-initramfs -u -k " + std::string(release);
    case Initramfs::Generator::Dracut: return "dracut -f --kver " + std::string(release);
  }
  return "";
}

}  // namespace iommud::core
