// The one exception the protocol's readers throw: a job, result or policy that does not have the
// documented form. It names the field, so a config loader can report "evaluator.timing.min_samples".
#pragma once

#include <stdexcept>
#include <string>

namespace ptxbench::protocol {

class ProtocolError : public std::runtime_error {
 public:
  /// `field`: the offending key's path inside the object read ("min_samples", "workloads[1].launch").
  ProtocolError(std::string field, const std::string &message)
      : std::runtime_error(field.empty() ? message : field + ": " + message),
        field_(std::move(field)),
        message_(message) {}
  const std::string &field() const { return field_; }
  /// The message without the field.
  const std::string &message() const { return message_; }

 private:
  std::string field_;
  std::string message_;
};

}  // namespace ptxbench::protocol
