// The floor of the status benchmark: the least work any tool must do to list PCI devices with
// their ids and drivers. For each device under ROOT/sys/bus/pci/devices it opens and reads six
// attributes and reads the driver link; nothing is parsed or printed. Prints the device count.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ROOT\n", argv[0]);
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
