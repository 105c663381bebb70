// The floors of the status benchmark.
//
// `bench_floor ROOT`: the least work any tool must do to list PCI devices with their ids and
// drivers. For each device under ROOT/sys/bus/pci/devices it opens and reads six attributes and
// reads the driver link; nothing is parsed or printed. Prints the device count.
//
// `bench_floor ROOT --reads=LIST`: exactly what `iommuctl --root ROOT status` reads (LIST: one
// "F path", "L path", "D path" or "M path" per line, as its Recorder captured them), read the way
// any reader of an untrusted root must: every path resolved inside the root from one held
// directory (openat2 RESOLVE_IN_ROOT), a file looked at (O_PATH, fstat) before it is opened for
// reading, so that no device node is opened; a link read beside its parent; a directory listed;
// a path status looked for and did not find (M: `config`, `sriov_numvfs`, a NIC's `master` on
// the synthetic host) looked for once. Nothing is parsed, decided or printed: what status does
// beyond this is its own cost.
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

int openInRoot(int root, const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root, path.c_str(), &how, sizeof how));
}

int containedReads(const char* rootPath, const char* listPath) {
  int root = ::open(rootPath, O_PATH | O_DIRECTORY | O_CLOEXEC);
  std::ifstream list(listPath);
  if (root < 0 || !list) {
    std::perror(root < 0 ? rootPath : listPath);
    return 1;
  }
  std::array<char, 65536> buf{};
  size_t bytes = 0, reads = 0;
  std::string line;
  while (std::getline(list, line)) {
    if (line.size() < 3) continue;
    const std::string path = line.substr(2);
    ++reads;
    if (line[0] == 'F') {
      int look = openInRoot(root, path, O_PATH);
      struct stat st {};
      bool regular = look >= 0 && ::fstat(look, &st) == 0 && S_ISREG(st.st_mode);
      if (look >= 0) ::close(look);
      if (!regular) continue;
      int fd = openInRoot(root, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
      if (fd < 0) continue;
      if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n > 0) bytes += static_cast<size_t>(n);
      }
      ::close(fd);
    } else if (line[0] == 'L') {
      const size_t slash = path.rfind('/');
      int parent = openInRoot(root, slash == 0 ? "/" : path.substr(0, slash), O_PATH | O_DIRECTORY);
      if (parent < 0) continue;
      ssize_t n = ::readlinkat(parent, path.c_str() + slash + 1, buf.data(), buf.size());
      if (n > 0) bytes += static_cast<size_t>(n);
      ::close(parent);
    } else if (line[0] == 'M') {  // looked for, not there: the look alone
      int look = openInRoot(root, path, O_PATH);
      if (look >= 0) ::close(look);
    } else if (line[0] == 'D') {
      int fd = openInRoot(root, path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
      if (fd < 0) continue;
      DIR* dir = ::fdopendir(fd);
      if (dir == nullptr) {
        ::close(fd);
        continue;
      }
      while (const dirent* e = ::readdir(dir)) bytes += std::strlen(e->d_name);
      ::closedir(dir);
    }
  }
  ::close(root);
  std::printf("%zu reads, %zu bytes\n", reads, bytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strncmp(argv[2], "--reads=", 8) == 0) return containedReads(argv[1], argv[2] + 8);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ROOT [--reads=LIST]\n", argv[0]);
    return 2;
  }
  std::string devices = std::string(argv[1]) + "/sys/bus/pci/devices/";
  DIR* dir = ::opendir(devices.c_str());
  if (dir == nullptr) {
    std::perror(devices.c_str());
    return 1;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  ::closedir(dir);

  constexpr std::array kAttributes{"vendor", "device", "subsystem_vendor", "subsystem_device", "class", "removable"};
  std::array<char, 4096> buf{};
  size_t bytes = 0;
  std::string path;
  for (const auto& name : names) {
    for (const char* attribute : kAttributes) {
      path = devices + name + "/" + attribute;
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n > 0) bytes += static_cast<size_t>(n);
      ::close(fd);
    }
    path = devices + name + "/driver";
    ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
    if (n > 0) bytes += static_cast<size_t>(n);
  }
  std::printf("%zu devices, %zu bytes\n", names.size(), bytes);
  return 0;
}
