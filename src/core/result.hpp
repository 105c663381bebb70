#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace iommud::core {

/// A failure the world caused: an errno (0 if none applies), the path or object, and what it means.
struct Error {
  int code = 0;
  std::string path;
  std::string message;

  /// "PATH: MESSAGE" (or just MESSAGE when no path applies).
  [[nodiscard]] std::string describe() const { return path.empty() ? message : path + ": " + message; }
};

inline Error errnoError(int code, std::string path) {
  return Error{code, std::move(path), std::strerror(code)};
}

/// The value of a Result that has nothing to return but success.
struct Done {};

/// Either a value or an Error; used for everything the outside world can make fail.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  [[nodiscard]] const Error& error() const { return std::get<Error>(v_); }

  template <class U>
  T valueOr(U&& fallback) const& {
    return ok() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Error> v_;
};

}  // namespace iommud::core
