// The GPU core's error type: a bzna_gpu.h status code and a message. No absl
// (the core must build where TensorFlow cannot go); the TensorFlow kernels
// turn it into an absl::Status at the C ABI.

#ifndef BZNA_TF_GPU_CORE_STATUS_H_
#define BZNA_TF_GPU_CORE_STATUS_H_

#include <sstream>
#include <string>
#include <utility>

#include "gpu/core/bzna_gpu.h"

namespace bzna_tf {
namespace gpu {

class Status {
 public:
  Status() = default;
  Status(int code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == BZNA_GPU_OK; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same code with `prefix` before the message.
  Status Prefixed(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + message_);
  }

 private:
  int code_ = BZNA_GPU_OK;
  std::string message_;
};

// Concatenates anything std::ostream can print.
template <typename... Args>
std::string Cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return Status(BZNA_GPU_INVALID_ARGUMENT, Cat(args...));
}
template <typename... Args>
Status Unavailable(const Args&... args) {
  return Status(BZNA_GPU_UNAVAILABLE, Cat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return Status(BZNA_GPU_INTERNAL, Cat(args...));
}

// A value or the Status saying why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like absl
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& operator*() { return value_; }
  const T& operator*() const { return value_; }
  T* operator->() { return &value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace gpu
}  // namespace bzna_tf

// Returns a non-OK Status from the enclosing function.
#define BZNA_GPU_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    const ::bzna_tf::gpu::Status bzna_gpu_status = (expr); \
    if (!bzna_gpu_status.ok()) return bzna_gpu_status;   \
  } while (0)

#endif  // BZNA_TF_GPU_CORE_STATUS_H_
