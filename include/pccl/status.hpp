// pccl::Status and pccl::Result<T>: how every fallible C++ call reports failure.
// Codes map 1:1 onto pcclResult_t in the C API.
#ifndef PCCL_STATUS_HPP_
#define PCCL_STATUS_HPP_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pccl/export.h"

namespace pccl {

enum class Code : int {
  kOk = 0,
  kInvalidArgument,
  kInvalidUsage,
  kMasterUnreachable,
  kAuthFailed,
  kVersionMismatch,
  kPeerLost,
  kTooFewPeers,
  kTimeout,
  kMismatch,
  kKicked,
  kUnsupported,
  kSystemError,
  kInternalError,
  kProtocolError,  // the remote side sent malformed or unexpected bytes
  // The ring changed or is changing under this call (a peer is in updateTopology, or this peer is an
  // epoch behind): call updateTopology, then retry. Unlike kMismatch, a retry cures it.
  kTopologyChanged,
};

PCCL_API const char* codeName(Code code);

class [[nodiscard]] PCCL_API Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status invalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status invalidUsage(std::string m) { return {Code::kInvalidUsage, std::move(m)}; }
  static Status masterUnreachable(std::string m) { return {Code::kMasterUnreachable, std::move(m)}; }
  static Status authFailed(std::string m) { return {Code::kAuthFailed, std::move(m)}; }
  static Status versionMismatch(std::string m) { return {Code::kVersionMismatch, std::move(m)}; }
  static Status peerLost(std::string m) { return {Code::kPeerLost, std::move(m)}; }
  static Status tooFewPeers(std::string m) { return {Code::kTooFewPeers, std::move(m)}; }
  static Status timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status mismatch(std::string m) { return {Code::kMismatch, std::move(m)}; }
  static Status kicked(std::string m) { return {Code::kKicked, std::move(m)}; }
  static Status unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
  static Status systemError(std::string m) { return {Code::kSystemError, std::move(m)}; }
  static Status internal(std::string m) { return {Code::kInternalError, std::move(m)}; }
  static Status protocol(std::string m) { return {Code::kProtocolError, std::move(m)}; }
  static Status topologyChanged(std::string m) { return {Code::kTopologyChanged, std::move(m)}; }

  bool isOk() const { return code_ == Code::kOk; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "context: message", keeping the code. Used to say which peer, tag or limit was involved.
  Status withContext(std::string_view context) const;
  // "CodeName: message", for logs.
  std::string toString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.isOk()) status_ = Status::internal("Result built from an OK status without a value");
  }

  bool isOk() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace pccl

// Return early from a function returning Status or Result<T> when `expr` fails.
#define PCCL_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::pccl::Status pccl_status_ = (expr);     \
    if (!pccl_status_.isOk()) return pccl_status_; \
  } while (0)

#define PCCL_CONCAT_INNER_(a, b) a##b
#define PCCL_CONCAT_(a, b) PCCL_CONCAT_INNER_(a, b)
#define PCCL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.isOk()) return tmp.status();             \
  lhs = std::move(tmp).value()
// PCCL_ASSIGN_OR_RETURN(auto x, resultExpr): binds the value or returns the failure.
#define PCCL_ASSIGN_OR_RETURN(lhs, expr) \
  PCCL_ASSIGN_OR_RETURN_IMPL_(PCCL_CONCAT_(pccl_result_, __LINE__), lhs, expr)

#endif  // PCCL_STATUS_HPP_
