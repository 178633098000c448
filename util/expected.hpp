// Expected-style return for expected failures (compile errors, HTTP 429,
// timeouts). Bugs throw; expected failures are values.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ptxbench::util {

template <class E>
struct Unexpected {
  E error;
};

template <class E>
Unexpected<std::decay_t<E>> unexpected(E &&e) {
  return {std::forward<E>(e)};
}

/// A value or an error. Minimal stand-in for C++23 std::expected.
template <class T, class E = std::string>
class Expected {
 public:
  Expected(T value) : data_(std::in_place_index<0>, std::move(value)) {}
  template <class E2>
  Expected(Unexpected<E2> u) : data_(std::in_place_index<1>, E(std::move(u.error))) {}

  bool has_value() const { return data_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T &value() & { return std::get<0>(data_); }
  const T &value() const & { return std::get<0>(data_); }
  T &&value() && { return std::get<0>(std::move(data_)); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  E &error() & { return std::get<1>(data_); }
  const E &error() const & { return std::get<1>(data_); }

 private:
  std::variant<T, E> data_;
};

/// Expected<void, E>: success or an error.
template <class E>
class Expected<void, E> {
 public:
  Expected() = default;
  template <class E2>
  Expected(Unexpected<E2> u) : error_(E(std::move(u.error))), ok_(false) {}
  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const E &error() const { return error_; }

 private:
  E error_{};
  bool ok_ = true;
};

}  // namespace ptxbench::util
