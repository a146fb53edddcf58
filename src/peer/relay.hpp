// Relayed ring links (issue 37, docs/protocol.md §5.4.4): a ring link between two members that cannot
// dial each other runs through a third member that can be dialled, which the master names
// (MemberInfo::relay). Both ends dial the relay (handshake role kRelay: only members of the run get in)
// and introduce each connection with a RelayHello signed by their ring key over that connection's
// session id; the relay pairs the link's `from` and `to` connections of one index, answers RelayReady
// on both and then copies raw bytes between them. Through that pipe the two ends run an ordinary ring
// connection: `from` dials (the handshake, sealed when the run encrypts, and a P2PHello signed with its
// ring key), `to` accepts (its listener takes the socket as if it had come in). The relay sees the
// handshake's public half and, in an encrypted run, ciphertext only; a byte it changes, drops, adds or
// replays fails the frame's authentication at the receiver in an encrypted run (an unencrypted run
// authenticates only the connection's start: there a relay is trusted as much as the network).
// Relayed connections do not resume (a break fails the ring's operations; the next ring builds anew).
// Thread: the communicator's io thread.
#ifndef PCCL_PEER_RELAY_HPP_
#define PCCL_PEER_RELAY_HPP_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "net/frame_io.hpp"
#include "net/handshake.hpp"
#include "net/identity.hpp"
#include "wire/messages.hpp"

namespace pccl::peer {

// The bytes a RelayHello's signature covers: a label, the connection's session id, then its fields.
std::vector<uint8_t> relayHelloSigned(const net::SessionId& session, const wire::RelayHello& hello);

// One end of connection `hello.index` of a relayed link: dials `relay`, authenticates (role kRelay),
// sends `hello` (signed here with `identity`) and waits for RelayReady; `done` gets the raw socket, now
// spliced to the other end, or why not (`who` names the connection in messages).
struct RelayOpen {
  asio::io_context* io = nullptr;
  net::HostPort relay;
  std::shared_ptr<const net::AuthKey> key;
  std::shared_ptr<const net::SigningKey> identity;
  Millis timeout{5000};  // the connect and handshake each; then the wait for the other end
  std::string who;
  wire::RelayHello hello;
};
void openRelayed(const RelayOpen& o, std::function<void(Result<net::Tcp::socket>)> done);

// The relay's side: the links this member relays in the current ring, and the splices.
class Relay {
 public:
  struct Link {
    wire::MemberInfo from, to;  // data flows from -> to; each end dials us
    uint32_t connections = 0;   // the link's connections (indices 0..connections-1)
  };
  explicit Relay(Millis handshake_timeout) : timeout_(handshake_timeout) {}
  ~Relay();
  // The links of `epoch`'s ring that run through us (none: nothing is accepted). Pairs still waiting
  // for their other end are dropped; splices in progress run on until an end closes.
  void expect(uint64_t epoch, std::vector<Link> links);
  // A connection that authenticated with role kRelay: reads its RelayHello, checks it, pairs it.
  void adopt(net::Link link);
  void shutdown();
  uint64_t relayedBytes() const { return relayed_bytes_->load(std::memory_order_relaxed); }

 private:
  using Key = std::tuple<uint64_t, wire::Uuid, wire::Uuid, uint32_t>;  // epoch, from, to, index
  struct Waiting {
    std::shared_ptr<net::FrameIo> io;
    bool from_side = false;
  };
  void onHello(const std::shared_ptr<net::FrameIo>& io, const wire::RelayHello& hello);
  Status check(const net::FrameIo& io, const wire::RelayHello& hello) const;
  void splice(std::shared_ptr<net::FrameIo> a, std::shared_ptr<net::FrameIo> b, const std::string& name);

  Millis timeout_;
  uint64_t epoch_ = 0;
  std::vector<Link> links_;
  std::map<Key, Waiting> waiting_;  // one end of a connection, until the other comes
  std::vector<std::pair<std::shared_ptr<net::FrameIo>, wire::RelayHello>> early_;  // for a later epoch (bounded)
  std::vector<std::weak_ptr<net::Tcp::socket>> spliced_;   // closed by shutdown()
  std::shared_ptr<std::atomic<uint64_t>> relayed_bytes_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The ring links of `ring` (a TopologyUpdate's) that `self` relays: every member whose relay is `self`,
// with its group successor and the link's connections (wire::linkConnections).
std::vector<Relay::Link> relayedBy(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self);

// Test hook (tests/test_relay.cpp, a hostile relay): 1 flips a byte, 2 sends a chunk twice, in the
// from -> to bytes of each relayed connection once 64 KiB have passed; 0 (the default) relays faithfully.
void relayTamperForTest(int mode);

}  // namespace pccl::peer

#endif  // PCCL_PEER_RELAY_HPP_
