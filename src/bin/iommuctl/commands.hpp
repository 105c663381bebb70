#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace iommud::ctl {

/// Options every subcommand shares.
struct Globals {
  std::string root = "/";
};

/// Each subcommand registers itself on the app and returns the exit code through `code`.
void addStatus(CLI::App& app, const Globals& globals, int& code);
void addSnapshot(CLI::App& app, const Globals& globals, int& code);

}  // namespace iommud::ctl
