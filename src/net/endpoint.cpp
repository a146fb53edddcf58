#include "net/endpoint.hpp"

#include <cstdlib>

namespace pccl::net {

std::string HostPort::toString() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HostPort> parseHostPort(const std::string& text, const char* what) {
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument(std::string(what) + " '" + text + "' is not HOST:PORT (" + why + ")");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("missing ':PORT'");
  std::string host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return bad("empty host");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return bad("port must be a number");
  }
  long p = std::strtol(port.c_str(), nullptr, 10);
  if (p > 65535) return bad("port above 65535");
  return HostPort{host, static_cast<uint16_t>(p)};
}

}  // namespace pccl::net
