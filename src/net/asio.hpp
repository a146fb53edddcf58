// The one place Asio is included from, with the helpers every socket in pccl goes through.
#ifndef PCCL_NET_ASIO_HPP_
#define PCCL_NET_ASIO_HPP_

#include <asio.hpp>
#include <string>

namespace pccl::net {

using Tcp = asio::ip::tcp;

// TCP_NODELAY on every socket: control messages are small and latency-bound.
inline void tuneSocket(Tcp::socket& s) {
  asio::error_code ec;
  s.set_option(Tcp::no_delay(true), ec);
}

inline std::string remoteName(const Tcp::socket& s) {
  asio::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  std::string addr = ep.address().to_string();
  if (ep.address().is_v6()) addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

}  // namespace pccl::net

#endif  // PCCL_NET_ASIO_HPP_
