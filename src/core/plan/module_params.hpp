#pragma once

// Module parameters rules ask for, at runtime (/sys/module) or at load (a modprobe.d file): a
// parameter is global to its module, so the wishes of every device are gathered, then planned once.

#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "core/plan/context.hpp"
#include "core/plan/recorder.hpp"

namespace iommud::core::planning {

class ParamWishes {
 public:
  // A matching rule's parameters for device `c`, in rule order: the last rule wins.
  void collect(const DeviceCtx& c, const Rule& r, Recorder& out);
  // Every module's parameters, once the wishes of all devices are in.
  void plan(const PlanInput& in, Recorder& out) const;

  struct Wish {
    const Rule* rule;
    const ParamSetting* param;
    std::string module;
  };
  // By device, module, parameter and when: keys view strings of the host and the rules, which
  // outlive the planner.
  using ByKey = std::map<std::tuple<std::string_view, std::string, std::string_view, ParamSetting::At>, Wish>;

 private:
  ByKey wishes_;
};

// When a modprobe.d change takes effect, with what the host knows of its initramfs.
void noteLoadTime(Change& c, const HostFacts& host);

}  // namespace iommud::core::planning
