// The authenticated pool of ring connections for one epoch: K outbound connections to our ring
// successor (we send on them) and our predecessor's K inbound ones (we receive on them). The sender
// of a link opens it, unless the receiver cannot be dialled and the sender can (a firewall, a NAT:
// wire::opensLink); then the receiver dials, its hellos say kHelloReverse, and the data flows as before.
// Each is authenticated, then introduced with P2PHello / P2PAccept, then becomes a DataChannel. A
// P2PHello is signed with its sender's ring key over the connection's session id (net/identity.hpp):
// an inbound connection is accepted (HelloAcceptor, an epoch being its round) only when the signature
// verifies with the key the master listed for our predecessor, and each of its K indices only once.
// Inbound connections that arrive before we have learnt their epoch wait (bounded by the handshake
// deadline) until we do.
// Resumable connections (setResume(), docs/protocol.md §5.4.3): a connection resumes when both ends have
// it on and neither lends payloads on it (a same-host neighbour, net/lending.hpp). When one breaks, the end that dialled it dials again (every
// 100 ms at first, then every second) with a resume hello, until a new connection takes over or the
// channel's wait ends (it then closes, and the ring fails as for a lost peer).
// Thread: the communicator's io thread.
#ifndef PCCL_PEER_RING_POOL_HPP_
#define PCCL_PEER_RING_POOL_HPP_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/data_channel.hpp"
#include "net/frame_io.hpp"
#include "net/handshake.hpp"
#include "net/identity.hpp"
#include "peer/hello_acceptor.hpp"
#include "peer/p2p_hello.hpp"
#include "wire/messages.hpp"

namespace pccl::peer {

struct RingPlan {
  uint64_t epoch = 0;
  wire::Uuid self{};
  bool alone = true;                // our group has a single member: no ring connections
  wire::MemberInfo successor;       // we open successor_connections to it
  uint32_t successor_connections = 0;
  wire::Uuid predecessor{};         // it opens predecessor_connections to us
  wire::SignKey predecessor_key{};  // its ring hellos verify with this
  uint32_t predecessor_connections = 0;
  bool successor_same_host = false;    // sameHost(): the links lend payloads (net/lending.hpp)
  bool predecessor_same_host = false;
  // Whoever can dial, dials (wire::opensLink, issue 37): false when the successor cannot be dialled
  // and we can: it opens our outbound connections, with kHelloReverse hellos.
  bool dial_successor = true;
  // True when we cannot be dialled and the predecessor can: we open our inbound connections to it
  // (kHelloReverse), at predecessor_at.
  bool dial_predecessor = false;
  wire::MemberInfo predecessor_at;
  // A link through a relay (MemberInfo::relay: neither end can be dialled, peer/relay.hpp). Sending
  // through one, our successor connections dial the relay first; receiving through one, we dial it for
  // each of the predecessor's connections and take the socket in as if it had been accepted.
  bool successor_relayed = false;
  wire::MemberInfo successor_relay;
  bool predecessor_relayed = false;
  wire::MemberInfo predecessor_relay;
  // Links to group members besides the ring neighbours (a two-level group, docs/algorithms.md §12):
  // one set of connections per pair, opened by one side, carrying data both ways.
  struct Extra {
    wire::MemberInfo peer;
    uint32_t rank = 0;          // its group rank
    bool dial = false;          // we open the connections; else it does
    uint32_t connections = 0;   // the dialler's linkConnections()
  };
  std::vector<Extra> extra;
};

using wire::sameHost;

// Pure: our successor and predecessor within our group, in global ring order, and how many
// connections each link has: the sender's `connections`, or its `host_connections` when both ends
// are on the same host (one flow is not limited there, and every extra one costs CPU).
RingPlan planRing(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self, uint64_t epoch);

class RingPool {
 public:
  using Done = std::function<void(uint64_t epoch, const Status&)>;
  using Channels = std::vector<std::shared_ptr<net::DataChannel>>;

  // handshake_timeout bounds each connection's authentication and hello (and early arrivals);
  // build_timeout bounds a whole build. `lend`: connections to a neighbour on this host lend payloads
  // (net/lending.hpp).
  RingPool(asio::io_context& io, std::shared_ptr<const net::AuthKey> key,
           std::shared_ptr<const net::SigningKey> identity, Millis handshake_timeout, Millis build_timeout,
           bool lend = true);
  ~RingPool();

  struct Resume {
    bool on = false;
    Millis wait{10000};  // how long a broken connection waits for a new one
    Millis stall{0};     // no TCP acknowledgement for this long with data in flight: broken (0: never)
    std::function<void(uint64_t resent, Millis stalled)> resumed;  // each resume (for the stats)
  };
  void setResume(Resume r) { resume_ = std::move(r); }

  void build(const RingPlan& plan, Done done);  // replaces the previous pool
  void reset(const Status& why);               // closes every ring connection
  // An authenticated peer-to-peer socket from our listener; reads its P2PHello.
  void adopt(net::Link link);
  // Where a relayed predecessor connection's socket goes once the relay spliced it (the listener's
  // adopt(): authenticated as an accepted connection, then adopt() above).
  void setAdoptInbound(std::function<void(net::Tcp::socket)> f) { adopt_inbound_ = std::move(f); }

  // Valid once `done` reported success, until the next build or reset.
  Channels outbound() const;  // to the successor, whichever side opened them
  Channels inbound() const;   // the predecessor's
  // The plan's extra links, in its order: each one's connections, whichever side opened them.
  std::vector<Channels> extraLinks() const;
  const RingPlan& plan() const { return plan_; }

 private:
  // Opens connection `index` to `to`: the successor's (extra == kSuccessor), the predecessor's when we
  // dial it (kPredecessor) or the plan's extra link `extra`; a failure before the hello is dialled
  // again (attempt 1, 2) before it fails the build.
  static constexpr int kSuccessor = -1;
  static constexpr int kPredecessor = -2;
  Channels& slotsOf(int extra);
  // A hello dial of connection `index` of that link (kHelloReverse to the predecessor).
  HelloDial dialTo(const wire::MemberInfo& to, int extra, uint64_t epoch, uint32_t index) const;
  uint32_t acceptedFromPredecessor() const;  // the acceptor's slots for the predecessor
  void openFromRelay(uint32_t index, uint64_t epoch);  // a relayed predecessor connection
  void connectOne(const wire::MemberInfo& to, int extra, uint32_t index, uint64_t epoch, int attempt = 0,
                  bool resume = false);
  // Whether the connections we open (to the successor when extra < 0) or `sender` opens resume.
  bool resumableTo(int extra) const;
  bool resumableFrom(const wire::Uuid& sender) const;
  // What a resumable channel does when it breaks: we dialled it (`to`): dial again; else wait.
  net::ResumeOptions resumeOptions(const wire::MemberInfo* to, int extra, uint32_t index, uint64_t epoch);
  void redial(std::weak_ptr<net::DataChannel> ch, const wire::MemberInfo& to, int extra, uint32_t index,
              uint64_t epoch, Millis backoff);
  void onAccepted(uint32_t index, bool resumable);
  void closeAll(const Status& why);
  void finish(const Status& s);
  void maybeDone();
  size_t count(const Channels& c) const;

  asio::io_context& io_;
  std::shared_ptr<const net::AuthKey> key_;
  std::shared_ptr<const net::SigningKey> identity_;
  Millis timeout_;
  Millis build_timeout_;
  bool lend_;
  Resume resume_;
  RingPlan plan_;
  bool building_ = false;
  Done done_;
  Channels out_;
  Channels in_;                      // the predecessor's, when we dial it
  std::vector<Channels> extra_out_;  // per extra link we dial (empty for the others)
  // The connections others open: the predecessor's (the inbound ones), then the extra links', then a
  // successor's that dials us.
  HelloAcceptor acceptor_;
  std::function<void(net::Tcp::socket)> adopt_inbound_;
  asio::steady_timer deadline_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pccl::peer

#endif  // PCCL_PEER_RING_POOL_HPP_
