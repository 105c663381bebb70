#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace iommud::testing {

/// Runs `body(devIno)` with stderr (fd 2) redirected to a temporary file and returns what was
/// written there. `devIno` is the file's "dev:inode", as JOURNAL_STREAM would name it.
template <class Body>
std::string capturedStderr(Body body) {
  std::fflush(stderr);
  FILE* file = std::tmpfile();
  int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(file), STDERR_FILENO);
  struct stat st {};
  ::fstat(STDERR_FILENO, &st);
  body(std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text;
  std::rewind(file);
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  std::fclose(file);
  return text;
}

}  // namespace iommud::testing
