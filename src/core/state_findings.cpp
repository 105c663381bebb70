#include "core/state_findings.hpp"

namespace iommud::core {

namespace {

std::string joinedWhat(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace

std::vector<Finding> damageFindings(const std::vector<DamagedStateFile>& files) {
  std::vector<Finding> out;
  for (const auto& d : files) {
    const std::string& where = d.keptAs.empty() ? d.file : d.keptAs;
    Finding f;
    f.id = std::string(kStateFileDamagedId);
    f.severity = Severity::Error;
    f.title = (d.keptAs.empty() ? d.file : d.keptAs) + " holds change records iommud cannot read";
    f.summary = "iommud keeps there what it changed, so that every change can be taken back; it could not understand " +
                (d.keptAs.empty() ? std::string("it") : "the file it moved aside from " + d.file) + ": " +
                joinedWhat(d.what) + "." +
                (d.salvaged ? " The records it could read were carried over into " + d.file + "." : "") +
                " Until this is dealt with iommud makes no change that weakens protection; it still reverts what it "
                "can read.";
    f.remedies.push_back({"Give back what it records: iommuctl revert --from " + where +
                              " (the file is then renamed *.reverted and kept)",
                          "none: it restores the protection the changes gave up"});
    f.remedies.push_back(
        {"Or, once what it records is known to be undone (iommuctl verify, iommuctl status), remove " + where, "none"});
    out.push_back(std::move(f));
  }
  return out;
}

std::string describeDamage(const std::vector<DamagedStateFile>& files) {
  std::string out;
  for (const auto& d : files) {
    out += (out.empty() ? "" : "; ") + (d.keptAs.empty() ? d.file : d.keptAs) + " not understood (" +
           joinedWhat(d.what) + ")";
  }
  return out;
}

}  // namespace iommud::core
