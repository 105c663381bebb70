#include "core/arch.hpp"

#include "core/text.hpp"

namespace iommud::core {

std::string_view toString(Arch arch) {
  return nameOf(kArchNames, arch);
}

Arch archFromMachine(std::string_view machine) {
  machine = trim(machine);
  if (machine.empty()) return Arch::Unknown;
  // UTS_MACHINE: x86_64, or i386..i686 for 32-bit x86 (arch/x86/Makefile).
  if (machine == "x86_64" ||
      (machine.size() == 4 && machine[0] == 'i' && machine.substr(2) == "86" && machine[1] >= '3' && machine[1] <= '6'))
    return Arch::X86;
  if (machine == "aarch64" || machine == "aarch64_be") return Arch::Arm64;
  return Arch::Other;
}

}  // namespace iommud::core
