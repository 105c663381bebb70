#include "core/unbound_findings.hpp"

namespace iommud::core {

std::vector<Finding> unboundFindings(const std::vector<UnboundDevice>& devices) {
  std::vector<Finding> out;
  for (const auto& d : devices) {
    Finding f;
    f.id = std::string(kDeviceLeftUnboundId);
    f.severity = Severity::Error;
    f.title = d.address + " was left without its driver";
    f.summary = "A domain change of group " + std::to_string(d.group) + " unbound " + d.address + " from " + d.driver +
                " and could not bind it again; " + d.journal + " keeps it, and iommud retries at its next start.";
    f.groups = {d.group};
    f.devices = {d.address};
    f.remedies.push_back({"Bind it again: echo " + d.address + " > /sys/bus/pci/drivers/" + d.driver +
                              "/bind (see dmesg if it fails), or restart iommud, which retries",
                          "none"});
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace iommud::core
