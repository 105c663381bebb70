#include "app/change/outcome_log.hpp"

#include "app/change/message_ids.hpp"
#include "core/exposure.hpp"

namespace iommud::app {

bool isRefusal(const Outcome& o) {
  return o.result == Outcome::Result::Refused ||
         (o.result == Outcome::Result::Skipped && o.skip != core::SkipReason::HotplugOnly &&
          o.skip != core::SkipReason::Overridden);
}

namespace {

using adapters::systemd::Priority;
using R = Outcome::Result;

// The group's members by the names people know them by.
std::string memberNames(const Outcome& o, const core::HostFacts& host) {
  std::string members;
  for (const auto& a : o.members) {
    const auto* m = host.device(a);
    members += (members.empty() ? "" : ", ") + (m != nullptr ? m->displayName() : a);
  }
  return members;
}

// What a domain change leaves the device exposed to, and what it was exposed to before.
struct DomainExposure {
  std::optional<core::Exposure> now;
  std::optional<core::Exposure> before;
};

DomainExposure domainExposure(const Outcome& o, const core::PciDevice* dev) {
  if (o.kind != core::ChangeKind::Domain) return {};
  auto to = core::parseDomainType(o.to);
  auto from = core::parseDomainType(o.from);
  bool untrusted = dev != nullptr && dev->untrusted();
  DomainExposure x;
  if (to) x.now = core::exposureOfType(*to, untrusted);
  if (from) x.before = core::exposureOfType(*from, untrusted);
  return x;
}

// "group 14 (nvme0, nvme1) type DMA -> identity, done: these devices can DMA to all memory;
// accepted by rule nvme-pair in /etc/iommud/policies.d/50-nvme.toml:3:1"
std::string describe(const Outcome& o, const core::HostFacts& host, OutcomeOf of, const DomainExposure& exposure) {
  std::string what = o.message;
  const std::string members = memberNames(o, host);
  // Names and the trade-off are added where the message does not already give them.
  if (auto at = what.find(o.object); !members.empty() && !o.object.empty() && at != std::string::npos &&
                                     what.compare(at + o.object.size(), 2, " (") != 0) {
    what.insert(at + o.object.size(), " (" + members + ")");
  }
  const bool made = of == OutcomeOf::Apply && (o.result == R::Done || o.result == R::Advised);
  if (made && !o.tradeOff.empty() && what.find(o.tradeOff) == std::string::npos) what += ": " + o.tradeOff;
  // A domain change that widens what the devices can reach names the new exposure.
  if (made && exposure.now && exposure.before && core::wider(*exposure.now, *exposure.before))
    what += "; exposure now: " + std::string(core::describe(*exposure.now));
  if (!o.rule.empty()) {
    const char* which = of == OutcomeOf::Revert ? "; the change was made by rule "
                        : o.result == R::Done   ? "; accepted by rule "
                                                : "; rule ";
    what += std::string(which) + o.rule + (o.ruleWhere.empty() ? "" : " in " + o.ruleWhere);
  }
  const std::string result = of == OutcomeOf::Revert && o.result == R::Done ? "reverted"
                             : o.result == R::Done                          ? ""
                                                                            : std::string(toString(o.result));
  return (result.empty() ? std::string() : result + ": ") + what;
}

// The entry's priority and, where people may look it up, its catalog message.
std::pair<Priority, std::string_view> classify(const Outcome& o, OutcomeOf of) {
  if (of == OutcomeOf::Revert && o.result == R::Done) return {Priority::Notice, msgid::kReverted};
  switch (o.result) {
    case R::Done:
      if (o.kind == core::ChangeKind::Domain && o.risk != core::Risk::None)
        return {Priority::Warning, msgid::kWeakened};
      return {Priority::Notice, msgid::kChanged};
    case R::Advised: return {Priority::Notice, msgid::kAdvised};
    case R::Refused: return {Priority::Warning, msgid::kRefused};
    case R::Skipped:
      if (isRefusal(o)) return {Priority::Notice, msgid::kRefused};
      return {Priority::Debug, {}};
    case R::Failed: return {Priority::Err, msgid::kFailed};
    case R::Drift:
    case R::Lost: return {Priority::Notice, msgid::kReverted};
    case R::Kept: break;
  }
  return {Priority::Debug, {}};
}

void addFields(adapters::systemd::Entry& e, const Outcome& o, const core::PciDevice* dev,
               const std::optional<core::Exposure>& exposure) {
  auto field = [&](const char* name, const std::string& value) {
    if (!value.empty()) e.fields.push_back({name, value});
  };
  field("IOMMUD_DEVICE", o.device);
  if (dev != nullptr) {
    field("IOMMUD_NAME", dev->displayName());
    field("IOMMUD_IDENTITY", dev->identity());
  }
  if (o.group) field("IOMMUD_GROUP", std::to_string(*o.group));
  field("IOMMUD_KIND", std::string(core::toString(o.kind)));
  field("IOMMUD_OBJECT", o.object);
  field("IOMMUD_KEY", o.key);
  field("IOMMUD_RULE", o.rule);
  field("IOMMUD_POLICY", o.ruleWhere);
  if (o.kind != core::ChangeKind::ModprobeConf) {  // a file's whole text is no field value
    field("IOMMUD_FROM", o.from);
    field("IOMMUD_TO", o.to);
  }
  if (o.risk != core::Risk::None) field("IOMMUD_RISK", std::string(core::toString(o.risk)));
  if (exposure) field("IOMMUD_EXPOSURE", std::string(core::toString(*exposure)));
  if (o.skip) field("IOMMUD_SKIP", std::string(core::toString(*o.skip)));
}

}  // namespace

adapters::systemd::Entry journalEntry(const Outcome& o, const core::HostFacts& host, OutcomeOf of) {
  adapters::systemd::Entry e;
  const auto* dev = host.device(o.device);
  auto exposure = domainExposure(o, dev);
  auto [priority, messageId] = classify(o, of);
  e.priority = priority;
  e.messageId = std::string(messageId);
  e.message = describe(o, host, of, exposure);
  addFields(e, o, dev, exposure.now);
  return e;
}

}  // namespace iommud::app
