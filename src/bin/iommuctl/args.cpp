#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "bin/iommuctl/commands.hpp"
#include "core/spelling.hpp"

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

const CLI::App* subcommandNamed(const CLI::App& app, const std::string& word) {
  const auto subs = app.get_subcommands({});
  auto it = std::find_if(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->check_name(word); });
  return it == subs.end() ? nullptr : *it;
}
bool isSubcommand(const CLI::App& app, const std::string& word) {
  return subcommandNamed(app, word) != nullptr;
}

std::vector<std::string> subcommandNames(const CLI::App& app) {
  std::vector<std::string> out;
  for (const auto* sub : app.get_subcommands({})) out.push_back(sub->get_name());
  return out;
}

/// The options of `cmd` as they are written: --json, -h.
std::vector<std::string> optionNames(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const auto* opt : cmd.get_options()) {
    for (const auto& l : opt->get_lnames()) out.push_back("--" + l);
    for (const auto& s : opt->get_snames()) out.push_back("-" + s);
  }
  return out;
}

// What CLI11 allows more than once: a list (--policies), or a value the last of which counts.
bool repeatable(const CLI::Option& opt) {
  return opt.get_multi_option_policy() != CLI::MultiOptionPolicy::Throw || opt.get_items_expected_max() > 1;
}

std::string unknownCommand(const CLI::App& app, const std::string& word) {
  const auto names = subcommandNames(app);
  if (auto near = core::nearestWord(word, names))
    return fmt::format("unknown command {}; did you mean {}?", word, *near);
  return fmt::format("unknown command {}; the commands are {}", word, fmt::join(names, ", "));
}

std::string unknownOption(const CLI::App& app, const CLI::App* sub, const std::string& name) {
  auto names = optionNames(app);
  if (sub != nullptr) {
    auto own = optionNames(*sub);
    names.insert(names.begin(), own.begin(), own.end());
  }
  if (auto near = core::nearestWord(name, names))
    return fmt::format("unknown option {}; did you mean {}?", name, *near);
  std::vector<std::string> having;  // the commands that have it: it was given to the wrong one
  for (const auto* other : app.get_subcommands({})) {
    if (other->get_option_no_throw(name) != nullptr) having.push_back(other->get_name());
  }
  if (having.empty()) return fmt::format("unknown option {}", name);
  return fmt::format("no option {} ({} {})", name, fmt::join(having, ", "), having.size() > 1 ? "have it" : "has it");
}

// Why the command line is wrong, said in words, when it is one of the mistakes people make: no
// command, an unknown one or an unknown option, an option without its value or given twice. The
// command is the subcommand named, if any. CLI11's own message says the rest (an invalid value).
struct Diagnosis {
  const CLI::App* command = nullptr;
  std::optional<std::string> why;
  bool noCommand = false;  // nothing wrong but that no command is named
};
// What is wrong with the option at args[i], if anything; i moves past the value it takes.
std::optional<std::string> optionMistake(const CLI::App& app, Diagnosis& d, const std::vector<std::string>& args,
                                         std::size_t& i, std::map<const CLI::Option*, int>& given) {
  const std::string& a = args[i];
  const auto eq = a.find('=');
  const std::string name = a.substr(0, eq);
  const CLI::Option* opt = d.command != nullptr ? d.command->get_option_no_throw(name) : nullptr;
  if (opt == nullptr) opt = app.get_option_no_throw(name);
  if (opt == nullptr) {
    // Before the command: the command written after it is the one meant.
    for (std::size_t j = i + 1; d.command == nullptr && j < args.size(); ++j) d.command = subcommandNamed(app, args[j]);
    return unknownOption(app, d.command, name);
  }
  if (opt->get_expected_min() > 0 && eq == std::string::npos) {
    if (i + 1 == args.size() || (args[i + 1].size() > 1 && args[i + 1][0] == '-')) {
      return fmt::format("{} needs a value", name);
    }
    ++i;
  }
  if (++given[opt] == 2 && !repeatable(*opt)) return fmt::format("{} is given twice; it takes one value", name);
  return std::nullopt;
}

Diagnosis diagnose(const CLI::App& app, const std::vector<std::string>& args) {
  Diagnosis d;
  std::map<const CLI::Option*, int> given;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      d.why = optionMistake(app, d, args, i, given);
      if (d.why) return d;
    } else if (d.command == nullptr) {  // else an argument of the command
      d.command = subcommandNamed(app, a);
      if (d.command == nullptr) {
        d.why = unknownCommand(app, a);
        return d;
      }
    }
  }
  if (d.command == nullptr) {
    d.why = fmt::format("a command is needed: {}", fmt::join(subcommandNames(app), ", "));
    d.noCommand = true;
  }
  return d;
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

std::vector<std::string> helpAsOption(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.size() < 2 || args[1] != "help") return args;
  if (args.size() == 2) return {args[0], "--help"};
  // An unknown command is said as such, with the nearest one, not answered with the main help.
  if (!isSubcommand(app, args[2])) return {args[0], args[2]};
  return {args[0], args[2], "--help"};
}

std::vector<std::string> verdictWhenBare(const CLI::App& app, std::vector<std::string> args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help" || args[i] == "-V" || args[i] == "--version") return args;
  }
  if (diagnose(app, args).noCommand) {
    args.emplace_back("status");
    args.emplace_back("--brief");
  }
  return args;
}

int usageError(const CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e) {
  const auto d = diagnose(app, args);
  const std::string command = d.command != nullptr ? "iommuctl " + d.command->get_name() : "iommuctl";
  std::fprintf(stderr, "%s: %s\nSee `%s --help`.\n", command.c_str(), d.why.value_or(e.what()).c_str(),
               command.c_str());
  return kUsageStatus;
}

}  // namespace iommud::ctl
