#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/findings.hpp"
#include "core/host.hpp"
#include "core/mode.hpp"
#include "core/names.hpp"
#include "core/policy.hpp"

namespace iommud::core {

/// What set of events the plan is for: a device that has just appeared (nothing uses it yet),
/// start and reload (coldplug), where disruptive changes are held back unless a rule allows them,
/// or boot (`iommud --early`, before the root filesystem is mounted), where only rules with
/// `when = "boot"` act, and act fully.
enum class Trigger { Hotplug, Coldplug, Boot };
inline constexpr Names<Trigger, 3> kTriggerNames{
    {{Trigger::Hotplug, "hotplug"}, {Trigger::Coldplug, "coldplug"}, {Trigger::Boot, "boot"}}};
static_assert(checkNames(kTriggerNames, Trigger::Boot));
std::string_view toString(Trigger t);

/// What a change touches. The order is the order of application within one device: runtime
/// module parameters, then the domain transaction (it rebinds the driver, which resets rings and
/// re-reads probe-time parameters), then ethtool settings; load-time parameters last (a file).
enum class ChangeKind { ModuleParam, Domain, Rings, Channels, Coalesce, ModprobeConf };
inline constexpr Names<ChangeKind, 6> kChangeKindNames{{{ChangeKind::ModuleParam, "module-param"},
                                                        {ChangeKind::Domain, "domain"},
                                                        {ChangeKind::Rings, "rings"},
                                                        {ChangeKind::Channels, "channels"},
                                                        {ChangeKind::Coalesce, "coalesce"},
                                                        {ChangeKind::ModprobeConf, "modprobe-conf"}}};
static_assert(checkNames(kChangeKindNames, ChangeKind::ModprobeConf));
std::string_view toString(ChangeKind k);
std::optional<ChangeKind> parseChangeKind(std::string_view name);

/// The rule that decided something, and where it is written.
struct RuleRef {
  std::string name;
  SourceLoc where;
};

/// An initramfs to rebuild before boots see a modprobe.d change: it holds the module, which then
/// loads at boot with the image's own copy of modprobe.d.
struct InitramfsRebuild {
  std::string image;    // "/boot/initrd.img-6.1.0-18-amd64"
  std::string command;  // "update-initramfs -u -k 6.1.0-18-amd64"
  bool checked = true;  // false: the image could not be listed, it may not hold the module (the note says why)
};

/// One change the plan makes (or, in advise mode, recommends).
struct Change {
  ChangeKind kind = ChangeKind::Domain;
  std::string device;                // the PCI address it is planned for (the first one, for a group)
  std::vector<std::string> devices;  // every device it affects
  std::optional<int> group;
  std::string object;  // "group 14", "enp3s0", "nvme.poll_queues", "/etc/modprobe.d/iommud-nvme.conf"
  std::string key;     // "type", "rx", "combined", "rx-usecs", the parameter's name
  std::string from;    // as now; "unknown" when it could not be read
  std::string to;      // as wanted; "max" resolved to a number when the maximum is known
  RuleRef rule;
  RuleMode mode = RuleMode::Apply;
  Risk risk = Risk::None;
  std::string tradeOff;       // the protection given up or gained, in words
  bool disruptive = false;    // rebinds a driver or resets a link
  bool irreversible = false;  // DMA -> DMA-FQ with drivers bound: only unbind or reboot undo it
  std::string note;           // what else the admin should know ("takes effect at the next probe")
  // modprobe.d only: the initramfs boots would load the module from, with its own modprobe.d copy.
  std::optional<InitramfsRebuild> initramfs;
};

/// Why a rule's wish will not happen.
enum class SkipReason {
  HotplugOnly,      // the rule acts only at hotplug (or boot) and this is a coldplug
  Untrusted,        // identity or lazy on an untrusted/removable device: never (safety rule)
  NeedsAcceptance,  // the rule weakens isolation without naming the trade-off it accepts
  InUse,            // a rebind is needed and a device of the group is in use, or (at start) a
                    // link reset is needed and the NIC carries traffic
  NeverUnbind,      // vfio-pci or an SR-IOV PF with VFs in the group
  GroupUncovered,   // the group also holds a device no rule covers
  Conflict,         // rules disagree on one setting
  KernelTooOld,     // type read-only before 5.11, no DMA-FQ before 5.15, one device per group before 6.4
  Unsupported,      // the hardware or driver cannot: no pass-through support, no such ring attribute
  NoIommu,          // the device is not translated by an IOMMU (no group)
  NoNetdev,         // ethtool settings on a device without a network interface
  ParamMissing,     // the module is not loaded or has no such parameter
  ParamReadOnly,    // a runtime parameter without a write bit
  Overridden,       // a later rule sets the same thing
};
inline constexpr Names<SkipReason, 14> kSkipReasonNames{{{SkipReason::HotplugOnly, "hotplug-only"},
                                                         {SkipReason::Untrusted, "untrusted"},
                                                         {SkipReason::NeedsAcceptance, "needs-acceptance"},
                                                         {SkipReason::InUse, "in-use"},
                                                         {SkipReason::NeverUnbind, "never-unbind"},
                                                         {SkipReason::GroupUncovered, "group-uncovered"},
                                                         {SkipReason::Conflict, "conflict"},
                                                         {SkipReason::KernelTooOld, "kernel-too-old"},
                                                         {SkipReason::Unsupported, "unsupported"},
                                                         {SkipReason::NoIommu, "no-iommu"},
                                                         {SkipReason::NoNetdev, "no-netdev"},
                                                         {SkipReason::ParamMissing, "param-missing"},
                                                         {SkipReason::ParamReadOnly, "param-read-only"},
                                                         {SkipReason::Overridden, "overridden"}}};
static_assert(checkNames(kSkipReasonNames, SkipReason::Overridden));
std::string_view toString(SkipReason r);

struct Skip {
  ChangeKind kind = ChangeKind::Domain;
  std::string device;
  std::string object;
  std::string key;
  std::string wanted;
  RuleRef rule;
  SkipReason reason = SkipReason::Unsupported;
  std::string message;
};

/// A setting a rule asks for that already has that value.
struct Satisfied {
  ChangeKind kind = ChangeKind::Domain;
  std::string device;
  std::string object;
  std::string key;
  std::string value;
  RuleRef rule;
};

/// The planner's answer: a diff of the host against the policies. Same inputs, same plan.
struct Plan {
  Trigger trigger = Trigger::Coldplug;
  std::vector<Change> changes;
  std::vector<Skip> skips;
  std::vector<Satisfied> satisfied;
};

struct PlanOptions {
  Trigger trigger = Trigger::Coldplug;
  std::optional<std::string> device;  // plan only for this PCI address (and what shares its group)
  bool adviseOnly = false;            // every change is advice
  bool reportOverridden = false;      // list rules whose settings later rules override (explain)
};

/// The host-side facts every rule evaluation needs, computed once per plan.
struct PlanInput {
  const HostFacts& host;
  const HostMode& mode;
  const std::vector<Finding>& findings;
};

Plan plan(const PlanInput& in, const PolicySet& policies, const PlanOptions& options = {});

/// Whether the plan writes a modprobe.d line: then, and only then, the initramfs is worth listing.
bool writesModprobeD(const Plan& plan);

/// Says again, for each modprobe.d line of the plan, when it takes effect, now that
/// `host.kernel.initramfs` is listed: whether boots load the module from an image that needs a
/// rebuild. The plan is not made again.
void noteInitramfs(Plan& plan, const HostFacts& host);

/// How one condition of a rule fared against a device, for `iommuctl explain`.
struct ConditionResult {
  std::string condition;  // "kind = nvme", "kernel = >=6.10,<6.12.43"
  bool holds = false;
  std::string actual;  // what the host has: "nic", "6.1.192"
};

/// Every condition of a rule evaluated against one device, without short-circuit.
struct RuleEvaluation {
  const Rule* rule = nullptr;
  bool matches = false;
  std::vector<ConditionResult> conditions;
};
std::vector<RuleEvaluation> evaluateRules(const PlanInput& in, const PolicySet& policies, const PciDevice& device);

}  // namespace iommud::core
