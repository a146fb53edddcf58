// The introduction of a peer-to-peer connection that carries data frames: ring connections (RingPool)
// and probe connections (LinkProber) open the same way (docs/protocol.md §5.4, §5.7). The connector dials
// with its handshake role, sends a P2PHello signed by its ring key over the connection's session id, and
// waits for P2PAccept; the acceptor reads the hello, checks the signature against the key the master
// listed for the sender, and accepts or refuses.
// Thread: the communicator's io thread.
#ifndef PCCL_PEER_P2P_HELLO_HPP_
#define PCCL_PEER_P2P_HELLO_HPP_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/frame_io.hpp"
#include "net/handshake.hpp"
#include "net/identity.hpp"
#include "wire/messages.hpp"

namespace pccl::peer {

// The bytes a P2PHello's signature covers (docs/protocol.md §5.4): a label, the connection's session
// id, then the hello's sender_id, epoch and index.
std::vector<uint8_t> ringHelloSigned(const net::SessionId& session, const wire::P2PHello& hello);

struct HelloDial {
  asio::io_context* io = nullptr;
  net::HostPort to;
  wire::Role role = wire::Role::kPeerToPeer;
  std::shared_ptr<const net::AuthKey> key;
  std::shared_ptr<const net::SigningKey> identity;
  Millis timeout{5000};
  std::string who;     // for messages: "ring successor 1a2b3c4d at HOST:PORT"
  wire::Uuid self{};
  uint64_t epoch = 0;  // the hello's epoch field (a probe's: its probe id)
  uint32_t index = 0;
  uint8_t flags = 0;      // wire::kHello*: resumable, or a resume of connection `index`
  uint64_t received = 0;  // a resume: the frames we took in on the broken connection
  // Set: a failure before the hello was sent (connect, authentication) comes here instead of to
  // dialWithHello's `failed` (nothing of this connection reached the acceptor's books: the caller may
  // dial again with the same index).
  std::function<void(const Status&)> before_hello;
  // Set: the connection runs through the relay at `relay` (a relayed ring link, peer/relay.hpp): dialled
  // with role kRelay and introduced by `relay_hello` (signed when sent) first, then authenticated and
  // introduced through it as any ring connection.
  bool via_relay = false;
  net::HostPort relay;
  wire::RelayHello relay_hello;

  // To `to`'s p2p listener; `what` names the connection in messages ("ring successor", "probe target").
  static HelloDial toMember(asio::io_context& io, const wire::MemberInfo& to, wire::Role role,
                      std::shared_ptr<const net::AuthKey> key, std::shared_ptr<const net::SigningKey> identity,
                      Millis timeout, const char* what);
};

// Dials, authenticates, says hello and waits for the accept. `stale()` is asked before each step (true:
// drop silently); `failed` gets any failure, with `who` as context; `accepted` gets the link and the
// acceptor's answer.
void dialWithHello(const HelloDial& d, std::function<bool()> stale, std::function<void(const Status&)> failed,
                   std::function<void(net::Link, const wire::P2PAccept&)> accepted);

// Reads an adopted connection's P2PHello (within `timeout`); `on_hello` gets it while `*alive`.
using HelloHandler = std::function<void(const std::shared_ptr<net::FrameIo>&, const wire::P2PHello&)>;
void readHello(net::Link link, Millis timeout, const char* kind, std::shared_ptr<bool> alive, HelloHandler on_hello);

// OK when the hello's signature verifies with `key` (what the master lists for its claimed sender).
Status verifyHello(const net::FrameIo& io, const wire::P2PHello& hello, const wire::SignKey& key, const char* kind,
                   const std::string& listed_for);

}  // namespace pccl::peer

#endif  // PCCL_PEER_P2P_HELLO_HPP_
