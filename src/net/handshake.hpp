// The authenticated handshake that opens every pccl connection (docs/protocol.md §6):
//   client: Hello(role, flags, client_nonce, client_kx)   server: HelloReply(flags, server_nonce, server_kx)
//   client: AuthProof(client proof)                       server: AuthOk(server proof) | Error(AuthFailed)
// Both proofs cover everything both sides sent (auth.hpp's Transcript). Both sides run under a
// deadline; nothing here blocks a thread. In an encrypted run (AuthKey::encrypt) the flags of Hello and
// HelloReply agree on it and pick the cipher, each side contributes an ephemeral X25519 key (`kx`), and
// the resulting Link carries the connection's keys, derived from the run key and the X25519 result (so
// they are forward-secret). Every Link carries its handshake's session id.
#ifndef PCCL_NET_HANDSHAKE_HPP_
#define PCCL_NET_HANDSHAKE_HPP_

#include <functional>
#include <memory>
#include <string>

#include "net/asio.hpp"
#include "net/auth.hpp"
#include "net/endpoint.hpp"
#include "net/frame_io.hpp"
#include "net/link.hpp"
#include "pccl/status.hpp"
#include "util/clock.hpp"

namespace pccl::net {


struct ClientHandshake {
  wire::Role role = wire::Role::kPeerToMaster;
  std::shared_ptr<const AuthKey> key;
  Millis timeout{5000};
  std::string server_name;  // for messages, e.g. "master 10.0.0.1:4000"
};
using ClientDone = std::function<void(Result<Link>)>;
void asyncClientHandshake(Tcp::socket socket, ClientHandshake params, ClientDone done);
// Resolves `to` and connects, within `timeout`. `done` runs once, on `io`'s thread, with the socket, or
// the error: `ec` (asio's: refused, unreachable...), `timed_out` when the deadline cut it, and `what`
// failed ("resolving", "connecting to").
struct Connected {
  Tcp::socket socket;
  asio::error_code ec;
  bool timed_out = false;
  const char* what = "";
};
void asyncConnect(asio::io_context& io, const HostPort& to, Millis timeout, std::function<void(Connected)> done);
// Resolves `to`, connects and runs the client handshake; `params.timeout` bounds the connect as well
// as the handshake (each). `done` runs once, on `io`'s thread.
void asyncDial(asio::io_context& io, const HostPort& to, ClientHandshake params, ClientDone done);

struct ServerHandshake {
  std::shared_ptr<const AuthKey> key;
  Millis timeout{5000};
};
struct Authenticated {
  Link link;
  wire::Role role;
};
using ServerDone = std::function<void(Result<Authenticated>)>;
void asyncServerHandshake(Tcp::socket socket, ServerHandshake params, ServerDone done);

}  // namespace pccl::net

#endif  // PCCL_NET_HANDSHAKE_HPP_
