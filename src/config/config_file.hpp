#pragma once

// Reading a file that configures iommud (a policy file, iommud.conf): capped, and, when iommud
// runs as root, refused if anyone but root can write it. Internal to iommud_config.

#include <sys/stat.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/file_opener.hpp"
#include "config/policy_loader.hpp"
#include "core/result.hpp"

namespace iommud::config::detail {

/// Who may write what configures iommud, as sshd's StrictModes: files and the directories they
/// are in owned by `owner` (0 when running as root) and not writable by group or others. Anyone
/// who can write a policy or iommud.conf can turn DMA protection off. Judges each directory once.
class WriterCheck {
 public:
  explicit WriterCheck(unsigned owner) : owner_(owner) {}

  /// The refusal of one file or directory, or nothing when only `owner` can write it.
  [[nodiscard]] std::optional<Diagnostic> judge(const std::string& path, const struct stat& st,
                                                std::string_view what) const;
  /// `dir`, opened by `opener`, judged, unless it was before (then nothing).
  std::optional<Diagnostic> judgeDirectory(const std::string& dir, std::string_view what, const FileOpener& opener);

 private:
  unsigned owner_;
  std::set<std::string> judged_;
};

/// A configuration file read, or why it was not.
struct ConfigFileText {
  std::optional<std::string> text;        // read, and trusted when a WriterCheck was given
  std::optional<core::Error> unreadable;  // open or read failed (ENOENT: there is no such file)
  std::vector<Diagnostic> refusals;       // who may write it or its directories; `text` unset if
                                          // the file itself is refused
};

/// Reads `path`, opened by `opener`, stopping once it holds more than `maxBytes` (parseToml then reports the size).
/// With `check`, the open file is judged (fstat on its descriptor, so the file judged is the file
/// read), and so are the directory it is named in and, through a symlink, the one it really is
/// in (as the kernel names the open file); `what` names the file in a refusal ("a policy file").
ConfigFileText readConfigFile(const std::string& path, size_t maxBytes, WriterCheck* check, std::string_view what,
                              const FileOpener& opener);

/// The directory part of a path ("." for a bare name).
std::string directoryOf(const std::string& path);

}  // namespace iommud::config::detail
