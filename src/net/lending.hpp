// Same-host lending: when a ring neighbour runs on this machine, a data frame's elements need not go
// through the socket (two copies and the whole TCP stack on each side). The sender lends them instead:
// it sends where they lie in its memory, and the receiver copies them straight into their destination
// with process_vm_readv(2) (one copy, done by the receiver) when it reads the frame. Nothing comes
// back: the sender keeps the elements unchanged for as long as its operation runs, which is long
// enough (DataChannel::enableLending(), docs/algorithms.md §5). Everything else (headers, control
// frames, failures) still travels on the connection. docs/protocol.md §5.4.1 has the frames.
//
// A connection lends only after its receiver proved it reads the sender's memory: the offer names a
// process id, the address of a 16-byte slot and a random nonce, and the receiver reads the slot there.
// The slot holds a token derived from the nonce, the connection's session id and the offering end's
// role (dialer or acceptor), which the receiver derives too: an offer sent back to its maker (the
// other role) or replayed on another connection (another session) names bytes that do not match, so
// nobody can make a peer accept "its own" memory, or a third process's, as the lender's. An offer
// naming the receiver's own process is accepted only at a slot another channel of this process made
// (in-process rings), never at bytes a remote could have planted in a buffer. Another host, another pid
// namespace, a kernel or sandbox that forbids process_vm_readv (seccomp, Yama, a non-dumpable process):
// the bytes do not match or cannot be read, nothing is accepted, and the frames keep going through the
// socket.
#ifndef PCCL_NET_LENDING_HPP_
#define PCCL_NET_LENDING_HPP_

#include <array>
#include <cstdint>

#include "net/auth.hpp"
#include "pccl/status.hpp"
#include "wire/data.hpp"

namespace pccl::net {

// Elements of fewer bytes go through the socket: for them the receiver's extra system call (the
// record, then the copy) costs more than the second copy saves.
inline constexpr uint32_t kLendMinBytes = 32 * 1024;

// Which end of its connection a channel is: the token of an offer depends on it.
enum class LendRole : uint8_t { kDialer = 0, kAcceptor = 1 };

// The 16 bytes an offer asks the remote to read, at a fixed address for the slot's lifetime, known to
// this process (the own-process rule above). Thread: any (the registry is locked).
class LendSlot {
 public:
  LendSlot();
  ~LendSlot();
  LendSlot(const LendSlot&) = delete;
  LendSlot& operator=(const LendSlot&) = delete;
  uint8_t* data() { return bytes_.data(); }
  // True when `addr` is a live slot of this process other than `except`.
  static bool isLiveSlot(uint64_t addr, const LendSlot* except);

 private:
  std::array<uint8_t, 16> bytes_{};
};

// The token an offer with `nonce` made by the `role` end of `session` puts in its slot.
std::array<uint8_t, 16> lendToken(const SessionId& session, LendRole role, const std::array<uint8_t, 16>& nonce);

// Fills `slot` with a fresh token and returns the offer that names it (and this process).
wire::LendOffer makeLendOffer(const SessionId& session, LendRole role, LendSlot* slot);

// Checks an offer that the `offerer` end of `session` sent to `self` (the receiving channel's slot, or
// null): ok only if the offering process holds the token derived for that end and session at the
// offered address (and, in this very process, only at another channel's live slot).
Status probeLender(const wire::LendOffer& offer, const SessionId& session, LendRole offerer, const LendSlot* self);

// Copies `bytes` at `addr` in process `pid` to `dst`.
Status readLent(uint32_t pid, uint64_t addr, uint8_t* dst, uint32_t bytes);

}  // namespace pccl::net

#endif  // PCCL_NET_LENDING_HPP_
