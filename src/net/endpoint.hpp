// "HOST:PORT" parsing (IPv4, hostnames, and "[v6]:PORT").
#ifndef PCCL_NET_ENDPOINT_HPP_
#define PCCL_NET_ENDPOINT_HPP_

#include <cstdint>
#include <string>

#include "pccl/status.hpp"

namespace pccl::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string toString() const;
};

// Parses "HOST:PORT". `what` names the setting in error messages (e.g. "master_address").
Result<HostPort> parseHostPort(const std::string& text, const char* what);

}  // namespace pccl::net

#endif  // PCCL_NET_ENDPOINT_HPP_
