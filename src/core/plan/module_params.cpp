#include "core/plan/module_params.hpp"

#include <optional>
#include <vector>

#include "core/initramfs.hpp"
#include "core/policy_lint.hpp"

namespace iommud::core::planning {

namespace {

// The image boots would load `module` from, when it holds it or could not be listed: its copy of
// modprobe.d is what the boot-time load reads.
std::optional<InitramfsRebuild> initramfsFor(const KernelInfo& k, const std::string& module) {
  const Initramfs& i = k.initramfs;
  const bool holds = i.state == Initramfs::State::Listed && i.modules.contains(canonicalModuleName(module));
  if (!holds && i.state != Initramfs::State::Unreadable) return std::nullopt;
  return InitramfsRebuild{i.image, initramfsRebuildCommand(i.generator, k.release), holds};
}

// When a modprobe.d line (`setting`, "poll_queues=4") for `module` takes effect, now and at boot.
std::string loadTimeNote(const std::string& module, const std::string& setting, bool running,
                         const std::optional<InitramfsRebuild>& rebuild, const std::string& unreadable) {
  if (!rebuild) {
    return running ? "already in effect now; the file keeps it across reboots"
                   : "takes effect when " + module + " is next loaded (reload the module or reboot)";
  }
  std::string now =
      running ? "already in effect now" : "takes effect when " + module + " is next loaded (reload the module)";
  const std::string rebuilds = "`" + rebuild->command + "` rebuilds it";
  if (rebuild->checked) {
    return now + "; " + module + " is in the initramfs " + rebuild->image + ": until " + rebuilds + ", boots load " +
           module + " without " + setting;
  }
  return now + "; the initramfs " + rebuild->image + " could not be checked for " + module + " (" + unreadable +
         "): if it holds " + module + ", boots load it without " + setting + " until " + rebuilds;
}

// Whether a module parameter's value is `b` (booleans print as Y/N whatever was written).
bool sameValue(const std::string& a, const std::string& b) {
  auto canon = [](const std::string& s) -> std::string {
    if (s == "1" || s == "Y" || s == "y") return "Y";
    if (s == "0" || s == "N" || s == "n") return "N";
    return s;
  };
  return a == b || canon(a) == canon(b);
}

constexpr std::string_view kModprobePrefix = "/etc/modprobe.d/iommud-";

// The module of a modprobe.d change: its object is kModprobePrefix + module + ".conf".
std::string modprobeModule(const Change& c) {
  return c.object.substr(kModprobePrefix.size(), c.object.size() - kModprobePrefix.size() - 5);
}

class ParamPlanner {
 public:
  using ParamWish = ParamWishes::Wish;
  ParamPlanner(const PlanInput& in, Recorder& out) : in_(in), out_(out) {}

  void run(const ParamWishes::ByKey& wishes) {
    // A parameter is global to its module: gather what every device's rules want.
    struct Wanted {
      std::vector<std::pair<std::string, const ParamWish*>> byDevice;
    };
    std::map<std::tuple<std::string, std::string, ParamSetting::At>, Wanted> global;
    for (const auto& [key, w] : wishes) {
      const auto& [device, module, name, at] = key;
      global[{module, std::string(name), at}].byDevice.emplace_back(std::string(device), &w);
    }
    for (const auto& [key, wanted] : global) {
      const auto& [module, name, at] = key;
      const ParamWish& first = *wanted.byDevice.front().second;
      const ChangeKind kind = at == ParamSetting::At::Load ? ChangeKind::ModprobeConf : ChangeKind::ModuleParam;
      const std::string object = module + "." + name;
      const std::string& lead = wanted.byDevice.front().first;
      bool conflict = false;
      for (const auto& [dev, w] : wanted.byDevice) {
        if (!sameValue(w->param->value, first.param->value)) {
          out_.skip(kind, dev, object, name, w->param->value, *w->rule, SkipReason::Conflict,
                    "rules disagree on " + object + ": '" + first.rule->name + "' wants " + first.param->value + ", '" +
                        w->rule->name + "' wants " + w->param->value);
          conflict = true;
        }
      }
      if (conflict) {
        out_.skip(kind, lead, object, name, first.param->value, *first.rule, SkipReason::Conflict,
                  "rules disagree on " + object + "; nothing is set");
        continue;
      }
      std::vector<std::string> devices;
      for (const auto& bd : wanted.byDevice) devices.push_back(bd.first);
      planParam(first, lead, devices, module, name, at);
    }
  }

 private:
  void planParam(const ParamWish& w, const std::string& lead, const std::vector<std::string>& devices,
                 const std::string& module, const std::string& name, ParamSetting::At at) {
    const bool load = at == ParamSetting::At::Load;
    const Rule& r = *w.rule;
    Change ch;
    ch.kind = load ? ChangeKind::ModprobeConf : ChangeKind::ModuleParam;
    ch.device = lead;
    ch.devices = devices;
    ch.object = load ? std::string(kModprobePrefix) + module + ".conf" : module + "." + name;
    ch.key = name;
    ch.to = w.param->value;
    ch.rule = refOf(r);
    ch.mode = out_.modeOf(r);
    ch.tradeOff = "does not change DMA isolation";
    auto mit = in_.host.modules.find(module);
    const Module* m = mit == in_.host.modules.end() ? nullptr : &mit->second;
    if (load) {
      planLoadTime(std::move(ch), w, m, module);
    } else {
      planRuntime(std::move(ch), w, m, module);
    }
  }

  // A line of /etc/modprobe.d/iommud-MODULE.conf.
  void planLoadTime(Change ch, const ParamWish& w, const Module* m, const std::string& module) {
    const std::string& name = ch.key;
    // The initramfs's /etc is thrown away at switch_root: the daemon writes the file at start
    // (not disruptive, so a boot rule's line is allowed then).
    if (out_.options.trigger == Trigger::Boot) return;
    if (m != nullptr && m->builtin) {
      skip(ch, *w.rule, SkipReason::Unsupported,
           module + " is built into the kernel: modprobe.d has no effect; put " + module + "." + name + "=" + ch.to +
               " on the kernel command line instead");
      return;
    }
    if (m != nullptr && lacksParam(*m, name)) {
      missing(ch, w, "module " + module + " has no parameter " + name);
      return;
    }
    std::optional<std::string> inFile;
    if (m != nullptr) {
      if (auto opt = m->iommudOptions.find(name); opt != m->iommudOptions.end()) inFile = opt->second;
    }
    if (inFile && sameValue(*inFile, ch.to)) {
      satisfied(ch);
      return;
    }
    ch.from = inFile.value_or("(not set)");
    noteLoadTime(ch, in_.host);
    out_.plan.changes.push_back(std::move(ch));
  }

  // A write to /sys/module/MODULE/parameters.
  void planRuntime(Change ch, const ParamWish& w, const Module* m, const std::string& module) {
    const std::string& name = ch.key;
    const ModuleParam* cur = nullptr;
    if (m != nullptr) {
      if (auto pit = m->params.find(name); pit != m->params.end()) cur = &pit->second;
    }
    if (m == nullptr || !m->loaded) {
      missing(ch, w, "module " + module + " is not loaded");
      return;
    }
    if (cur == nullptr) {
      missing(ch, w, "module " + module + " has no parameter " + name + " (or does not show it in /sys/module)");
      return;
    }
    if (!cur->writable) {
      skip(ch, *w.rule, SkipReason::ParamReadOnly,
           ch.object + " is read-only at runtime; use at = \"load\" to set it in modprobe.d");
      return;
    }
    if (sameValue(cur->value, ch.to)) {
      satisfied(ch);
      return;
    }
    if (!out_.allowedNow(*w.rule, false)) {
      skip(ch, *w.rule, SkipReason::HotplugOnly, Recorder::hotplugOnlyMessage(*w.rule, "the rule"));
      return;
    }
    ch.from = cur->value;
    if (w.param->takesEffect == ParamSetting::TakesEffect::Probe) {
      ch.note = module + " reads it only when it binds a device: it takes effect after a rebind or reload";
    }
    out_.plan.changes.push_back(std::move(ch));
  }

  void skip(const Change& ch, const Rule& r, SkipReason reason, std::string message) {
    out_.skip(ch.kind, ch.device, ch.object, ch.key, ch.to, r, reason, std::move(message));
  }

  // A missing module or parameter, unless the rule says it may be.
  void missing(const Change& ch, const ParamWish& w, std::string message) {
    if (!w.param->optional) skip(ch, *w.rule, SkipReason::ParamMissing, std::move(message));
  }

  void satisfied(const Change& ch) {
    out_.plan.satisfied.push_back(Satisfied{ch.kind, ch.device, ch.object, ch.key, ch.to, ch.rule});
  }

  const PlanInput& in_;
  Recorder& out_;
};

}  // namespace

void ParamWishes::collect(const DeviceCtx& c, const Rule& r, Recorder& out) {
  const std::string& a = c.dev->address;
  for (const auto& p : r.params) {
    std::string module = p.module.empty() ? c.dev->driverModule : p.module;
    if (module.empty() && c.dev->driver) module = *c.dev->driver;
    if (module.empty()) {
      out.skip(ChangeKind::ModuleParam, a, "(no driver)", p.name, p.value, r, SkipReason::ParamMissing,
               "the device has no driver, and the rule names no module for parameter " + p.name);
      continue;
    }
    auto key = std::tuple{std::string_view(a), module, std::string_view(p.name), p.at};
    auto [it, fresh] = wishes_.try_emplace(key, Wish{&r, &p, module});
    if (!fresh && out.options.reportOverridden) {
      out.skip(p.at == ParamSetting::At::Load ? ChangeKind::ModprobeConf : ChangeKind::ModuleParam, a,
               module + "." + p.name, p.name, it->second.param->value, *it->second.rule, SkipReason::Overridden,
               "rule '" + r.name + "' (" + r.where.str() + "), later in the order, sets it too");
    }
    if (!fresh) it->second = Wish{&r, &p, module};
  }
}

void ParamWishes::plan(const PlanInput& in, Recorder& out) const {
  ParamPlanner(in, out).run(wishes_);
}

// When a modprobe.d change takes effect, with what the host knows of its initramfs.
void noteLoadTime(Change& c, const HostFacts& host) {
  const std::string module = modprobeModule(c);
  bool running = false;
  if (auto m = host.modules.find(module); m != host.modules.end()) {
    auto p = m->second.params.find(c.key);
    running = p != m->second.params.end() && sameValue(p->second.value, c.to);
  }
  c.initramfs = initramfsFor(host.kernel, module);
  c.note = loadTimeNote(module, c.key + "=" + c.to, running, c.initramfs, host.kernel.initramfs.reason);
}

}  // namespace iommud::core::planning
