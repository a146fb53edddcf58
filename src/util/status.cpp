#include "pccl/status.hpp"

#include <string>

namespace pccl {

const char* codeName(Code code) {
  switch (code) {
    case Code::kOk: return "Success";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kInvalidUsage: return "InvalidUsage";
    case Code::kMasterUnreachable: return "MasterUnreachable";
    case Code::kAuthFailed: return "AuthFailed";
    case Code::kVersionMismatch: return "VersionMismatch";
    case Code::kPeerLost: return "PeerLost";
    case Code::kTooFewPeers: return "TooFewPeers";
    case Code::kTimeout: return "Timeout";
    case Code::kMismatch: return "Mismatch";
    case Code::kKicked: return "Kicked";
    case Code::kUnsupported: return "Unsupported";
    case Code::kSystemError: return "SystemError";
    case Code::kInternalError: return "InternalError";
    case Code::kProtocolError: return "ProtocolError";
    case Code::kTopologyChanged: return "TopologyChanged";
  }
  return "Unknown";
}

Status Status::withContext(std::string_view context) const {
  if (isOk()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

std::string Status::toString() const {
  if (isOk()) return "Success";
  std::string s = codeName(code_);
  s += ": ";
  s += message_;
  return s;
}

}  // namespace pccl
