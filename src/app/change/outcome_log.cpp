#include "app/change/outcome_log.hpp"

#include "app/change/message_ids.hpp"
#include "core/exposure.hpp"

namespace iommud::app {

bool isRefusal(const Outcome& o) {
  return o.result == Outcome::Result::Refused ||
         (o.result == Outcome::Result::Skipped && o.skip != core::SkipReason::HotplugOnly &&
          o.skip != core::SkipReason::Overridden);
}

adapters::systemd::Entry journalEntry(const Outcome& o, const core::HostFacts& host, OutcomeOf of) {
  using adapters::systemd::Priority;
  using R = Outcome::Result;
  adapters::systemd::Entry e;
  const auto* dev = host.device(o.device);
  std::string members;  // by the names people know them by
  for (const auto& a : o.members) {
    const auto* m = host.device(a);
    members += (members.empty() ? "" : ", ") + (m != nullptr ? m->displayName() : a);
  }
  // "group 14 (nvme0, nvme1) type DMA -> identity, done: these devices can DMA to all memory;
  // accepted by rule nvme-pair in /etc/iommud/policies.d/50-nvme.toml:3:1"
  std::string what = o.message;
  // Names and the trade-off are added where the message does not already give them.
  if (auto at = what.find(o.object); !members.empty() && !o.object.empty() && at != std::string::npos &&
                                     what.compare(at + o.object.size(), 2, " (") != 0) {
    what.insert(at + o.object.size(), " (" + members + ")");
  }
  const bool made = of == OutcomeOf::Apply && (o.result == R::Done || o.result == R::Advised);
  if (made && !o.tradeOff.empty() && what.find(o.tradeOff) == std::string::npos) what += ": " + o.tradeOff;
  // A domain change that widens what the devices can reach names the new exposure.
  std::optional<core::Exposure> exposure;
  if (o.kind == core::ChangeKind::Domain) {
    auto to = core::parseDomainType(o.to);
    auto from = core::parseDomainType(o.from);
    bool untrusted = dev != nullptr && dev->untrusted();
    if (to) exposure = core::exposureOfType(*to, untrusted);
    auto before = from ? core::exposureOfType(*from, untrusted) : std::nullopt;
    if (made && exposure && before && core::wider(*exposure, *before))
      what += "; exposure now: " + std::string(core::describe(*exposure));
  }
  std::string by;
  if (!o.rule.empty()) {
    const char* which = of == OutcomeOf::Revert ? "; the change was made by rule "
                        : o.result == R::Done   ? "; accepted by rule "
                                                : "; rule ";
    by = std::string(which) + o.rule + (o.ruleWhere.empty() ? "" : " in " + o.ruleWhere);
  }
  switch (o.result) {
    case R::Done:
      if (o.kind == core::ChangeKind::Domain && o.risk != core::Risk::None) {
        e.priority = Priority::Warning;
        e.messageId = std::string(msgid::kWeakened);
      } else {
        e.priority = Priority::Notice;
        e.messageId = std::string(msgid::kChanged);
      }
      break;
    case R::Advised:
      e.priority = Priority::Notice;
      e.messageId = std::string(msgid::kAdvised);
      break;
    case R::Refused:
      e.priority = Priority::Warning;
      e.messageId = std::string(msgid::kRefused);
      break;
    case R::Skipped:
      if (isRefusal(o)) {
        e.priority = Priority::Notice;
        e.messageId = std::string(msgid::kRefused);
      } else {
        e.priority = Priority::Debug;
      }
      break;
    case R::Failed:
      e.priority = Priority::Err;
      e.messageId = std::string(msgid::kFailed);
      break;
    case R::Drift:
      e.priority = Priority::Notice;
      e.messageId = std::string(msgid::kReverted);
      break;
    case R::Kept: e.priority = Priority::Debug; break;
    case R::Lost:
      e.priority = Priority::Notice;
      e.messageId = std::string(msgid::kReverted);
      break;
  }
  if (of == OutcomeOf::Revert && o.result == R::Done) {
    e.priority = Priority::Notice;
    e.messageId = std::string(msgid::kReverted);
  }
  const std::string result = of == OutcomeOf::Revert && o.result == R::Done ? "reverted"
                             : o.result == R::Done                          ? ""
                                                                            : std::string(toString(o.result));
  e.message = (result.empty() ? std::string() : result + ": ") + what + by;
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
  return e;
}

}  // namespace iommud::app
