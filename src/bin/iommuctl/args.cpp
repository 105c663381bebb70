#include <algorithm>

#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

namespace {

/// The option called `name` on `app` or on any of its subcommands, with whether it takes a value.
struct Known {
  bool global = false;
  bool takesValue = false;
};
std::optional<Known> lookUp(const CLI::App& app, const std::string& name) {
  if (const auto* opt = app.get_option_no_throw(name)) return Known{true, opt->get_expected_min() > 0};
  for (const auto* sub : app.get_subcommands({})) {
    if (const auto* opt = sub->get_option_no_throw(name)) return Known{false, opt->get_expected_min() > 0};
  }
  return std::nullopt;
}

bool isSubcommand(const CLI::App& app, const std::string& word) {
  const auto subs = app.get_subcommands({});
  return std::any_of(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->check_name(word); });
}

}  // namespace

std::vector<std::string> optionsAnywhere(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> before;  // the program name and the main command's own options
  std::vector<std::string> moved;   // a subcommand's options written before it
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      const auto eq = a.find('=');
      auto known = lookUp(app, a.substr(0, eq));
      auto& into = known && !known->global ? moved : before;
      into.push_back(a);
      if (known && known->takesValue && eq == std::string::npos && i + 1 < args.size()) into.push_back(args[++i]);
      continue;
    }
    if (!isSubcommand(app, a)) break;  // a stray word: CLI11 says what is wrong with it
    std::vector<std::string> out{args.front()};
    out.insert(out.end(), before.begin(), before.end());
    out.push_back(a);
    out.insert(out.end(), moved.begin(), moved.end());
    out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    return out;
  }
  return args;
}

}  // namespace iommud::ctl
