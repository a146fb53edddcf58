// The accepting half of the P2PHello introduction (p2p_hello.hpp), shared by the ring's inbound
// connections (RingPool) and a link survey's (LinkProber): rounds are a ring's epochs or a survey's
// probe ids, named by the hello's epoch field.
//
//   a hello for a round newer than the current one (or any hello while idle) is parked, at most
//   Rules::max_parked at a time, each within its own handshake deadline, until a round opens;
//   a round opens: the parked hellos are replayed;
//   a hello for the open round from its expected sender, signed with the key the master listed for
//   it, for an index not claimed yet: the index is claimed (before the P2PAccept is written, so that
//   another connection cannot say it meanwhile), P2PAccept goes out, and the connection becomes a
//   DataChannel in that index's slot;
//   anything else is refused with an Error (Rules::refuse, or a bad index) and closed.
// Resumable connections (docs/protocol.md §5.4.3): the P2PAccept agrees to resume when the hello asks and
// Rules::resumable says yes for the sender. A hello with kHelloResume, for the current round, from the
// sender of a slot whose channel resumes and is still open (even after stop()), hands the channel the
// new connection: the channel lets go of its old one, the P2PAccept tells the sender how many frames
// arrived, and the channel goes on on the new connection.
// Thread: the communicator's io thread.
#ifndef PCCL_PEER_HELLO_ACCEPTOR_HPP_
#define PCCL_PEER_HELLO_ACCEPTOR_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/data_channel.hpp"
#include "net/frame_io.hpp"
#include "wire/messages.hpp"

namespace pccl::peer {

class HelloAcceptor {
 public:
  using Channels = std::vector<std::shared_ptr<net::DataChannel>>;
  // What an owner's connections are called in messages, and its bounds.
  struct Rules {
    const char* kind = "ring";           // "ring", "probe": in the refusals and the signature check
    const char* who = "ring predecessor";  // an accepted connection's name, before its sender's short id
    size_t max_parked = 256;
    std::string too_many;                // the Error sent to a hello past max_parked
    // The Error for a hello of the current round (or an older one) that this round does not accept:
    // no connections expected, or another sender.
    std::function<Status(const wire::P2PHello& hello, uint64_t current)> refuse;
    // Appended to the signature check's Error ("" or " in epoch E").
    std::function<std::string(uint64_t current)> listed_for;
    // Whether connections from `sender` may resume (null: never).
    std::function<bool(const wire::Uuid& sender)> resumable;
  };
  // The round that opens: the connections it accepts.
  struct Sender {
    wire::Uuid id{};
    wire::SignKey key{};
    uint32_t connections = 0;  // its indices 0..connections-1, each accepted once
    // Its hellos say kHelloReverse: it dials because it cannot be dialled, and the connections carry
    // data from us to it (wire::opensLink). A sender may be listed twice, once each way.
    bool reverse = false;
    const char* who = "linked peer";  // an accepted connection's name, before the sender's short id
  };
  struct Round {
    uint64_t id = 0;
    bool accepts = false;  // false: it expects no connections (every hello for it is refused)
    wire::Uuid sender{};
    wire::SignKey sender_key{};
    uint32_t connections = 0;  // indices 0..connections-1, each accepted once
    // Further senders (a ring's two-level links, a successor that cannot be dialled): their slots follow
    // the first sender's, in this order. The first sender's hellos never say kHelloReverse.
    std::vector<Sender> more;
  };
  // A connection was accepted into slot `index` (channels()[index]); `resumable`: both ends agreed it
  // resumes (the owner calls enableResume() before start()).
  using Accepted = std::function<void(uint32_t index, bool resumable)>;

  HelloAcceptor(Millis handshake_timeout, Rules rules);
  ~HelloAcceptor();

  // An authenticated connection from our listener; reads its P2PHello.
  void adopt(net::Link link);
  // Round r becomes the current one, with empty slots; the parked hellos are replayed.
  void open(const Round& r, Accepted accepted);
  // Round `id` becomes the current one, accepting nothing (the parked hellos stay parked).
  void close(uint64_t id);
  // The current round accepts nothing more; its slots are kept.
  void stop() { round_.accepts = false; }
  // No current round: every hello is parked until one opens.
  void idle();
  // The slots of the current round (an accepted connection, or nullptr).
  const Channels& channels() const { return slots_; }
  // Hands the slots over and clears them (and their claims).
  Channels release();

 private:
  struct Parked {
    std::shared_ptr<net::FrameIo> io;
    wire::P2PHello hello;
  };
  void onHello(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello);
  void onResume(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello);
  // The name of slot `index`'s connections in messages.
  const char* slotName(uint32_t index) const;
  // Takes a checked hello's connection into slot `index` (claimed at once, filled once accepted).
  void acceptNew(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello, uint32_t index);
  // The slot of a hello for the current round: the sender is one the round lists, the signature
  // verifies and the index is in range; an Error (the refusal) otherwise.
  Result<uint32_t> slotOf(const net::FrameIo& io, const wire::P2PHello& hello) const;
  void park(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello);
  // The slot a hello is for; an Error (the refusal) when the round does not accept it.
  Result<uint32_t> check(const net::FrameIo& io, const wire::P2PHello& hello) const;

  Millis timeout_;
  Rules rules_;
  bool idle_ = true;
  Round round_;
  Accepted accepted_;
  Channels slots_;
  std::vector<bool> claimed_;  // per index: a hello for it was accepted (its P2PAccept may be in flight)
  std::vector<Parked> parked_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pccl::peer

#endif  // PCCL_PEER_HELLO_ACCEPTOR_HPP_
