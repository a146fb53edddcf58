#include "peer/hello_acceptor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "peer/p2p_hello.hpp"

namespace pccl::peer {

HelloAcceptor::HelloAcceptor(Millis handshake_timeout, Rules rules)
    : timeout_(handshake_timeout), rules_(std::move(rules)) {}

HelloAcceptor::~HelloAcceptor() {
  *alive_ = false;
  for (auto& p : parked_) p.io->fail(Status::ok());
}

void HelloAcceptor::adopt(net::Link link) {
  readHello(std::move(link), timeout_, rules_.kind, alive_,
            [this](const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello) { onHello(io, hello); });
}

void HelloAcceptor::open(const Round& r, Accepted accepted) {
  idle_ = false;
  round_ = r;
  accepted_ = std::move(accepted);
  size_t slots = r.connections;
  for (const Sender& m : r.more) slots += m.connections;
  slots_.assign(slots, nullptr);
  claimed_.assign(slots, false);
  // Connections that reached us before we learnt this round.
  std::vector<Parked> parked = std::move(parked_);
  parked_.clear();
  for (auto& p : parked) {
    if (!p.io->done()) onHello(p.io, p.hello);
  }
}

void HelloAcceptor::close(uint64_t id) {
  idle_ = false;
  round_ = Round{};
  round_.id = id;
}

void HelloAcceptor::idle() {
  idle_ = true;
  round_.accepts = false;
}

HelloAcceptor::Channels HelloAcceptor::release() {
  Channels out = std::move(slots_);
  slots_.clear();
  claimed_.clear();
  return out;
}

void HelloAcceptor::park(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello) {
  parked_.erase(std::remove_if(parked_.begin(), parked_.end(), [](const Parked& p) { return p.io->done(); }),
                parked_.end());
  if (parked_.size() >= rules_.max_parked) return io->rejectWith(Status::invalidUsage(rules_.too_many));
  parked_.push_back(Parked{io, hello});
}

void HelloAcceptor::onHello(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello) {
  if ((hello.flags & wire::kHelloResume) != 0) return onResume(io, hello);
  // From a round we have not heard of yet: it waits for its plan (the FrameIo deadline bounds it).
  if (idle_ || hello.epoch > round_.id) return park(io, hello);
  Result<uint32_t> checked = check(*io, hello);
  if (!checked.isOk()) return io->rejectWith(checked.status());
  acceptNew(io, hello, *checked);
}

void HelloAcceptor::acceptNew(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello, uint32_t index) {
  // Claimed now, not when the P2PAccept is written: another connection may say the same index meanwhile.
  const uint64_t id = round_.id;
  claimed_[index] = true;
  std::string who = std::string(slotName(index)) + " " +
                    wire::shortId(hello.sender_id);
  wire::P2PAccept accept;
  const bool resumable =
      (hello.flags & wire::kHelloResumable) != 0 && rules_.resumable && rules_.resumable(hello.sender_id);
  if (resumable) accept.flags = wire::kHelloResumable;
  io->write(wire::encodeFrame(accept, id), [this, io, index, id, who, resumable, alive = alive_] {
    // The round may have ended or moved on while the accept was written.
    if (!*alive || idle_ || !round_.accepts || round_.id != id || index >= slots_.size() || slots_[index] != nullptr) {
      return io->fail(Status::ok());
    }
    slots_[index] = std::make_shared<net::DataChannel>(io->release(), id, who);
    if (accepted_) accepted_(index, resumable);
  });
}

void HelloAcceptor::onResume(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello) {
  // A dialer whose first connection broke after its hello resumes what we may have accepted (it never
  // read our answer); from a round we have not opened yet, it waits like a first hello.
  if (idle_ || hello.epoch > round_.id) return park(io, hello);
  if (hello.epoch != round_.id) {
    return io->rejectWith(Status::invalidUsage(
        fmt::format("no {} connection of epoch {} to resume here (this peer is at {})", rules_.kind, hello.epoch,
                    round_.id)));
  }
  Result<uint32_t> slot = slotOf(*io, hello);
  if (!slot.isOk()) return io->rejectWith(slot.status());
  std::shared_ptr<net::DataChannel> ch = *slot < slots_.size() ? slots_[*slot] : nullptr;
  if (!ch && round_.accepts && *slot < claimed_.size()) {
    // We never took its first connection in (it broke before our accept was written, or never came):
    // this one is that connection. Its signature was checked (slotOf): only the sender can claim it.
    return acceptNew(io, hello, *slot);
  }
  if (!ch || !ch->isOpen() || !ch->resumable()) {
    return io->rejectWith(Status::invalidUsage(
        fmt::format("{} connection {} of epoch {} cannot be resumed: it {}", rules_.kind, hello.index, hello.epoch,
                    !ch ? "never came up" : !ch->isOpen() ? "was given up" : "was not made resumable")));
  }
  // From here on nothing more is read from the old connection: the count we answer with is final.
  ch->detach(Status::peerLost("the remote opened a new connection to take over"));
  wire::P2PAccept accept;
  accept.flags = wire::kHelloResumable;
  accept.received = ch->framesReceived();
  std::weak_ptr<net::DataChannel> weak = ch;
  io->write(wire::encodeFrame(accept, round_.id), [io, weak, received = hello.received, alive = alive_] {
    auto c = weak.lock();
    if (!*alive || !c || !c->isOpen()) return io->fail(Status::ok());
    (void)c->resumeOn(io->release(), received);  // a bad count closes the channel, with the reason
  });
}

const char* HelloAcceptor::slotName(uint32_t index) const {
  if (index < round_.connections) return rules_.who;
  uint32_t at = round_.connections;
  for (const Sender& m : round_.more) {
    at += m.connections;
    if (index < at) return m.who;
  }
  return "linked peer";
}

Result<uint32_t> HelloAcceptor::check(const net::FrameIo& io, const wire::P2PHello& hello) const {
  if (!round_.accepts || hello.epoch != round_.id) return rules_.refuse(hello, round_.id);
  PCCL_ASSIGN_OR_RETURN(uint32_t slot, slotOf(io, hello));
  if (claimed_[slot]) {
    return Status::invalidUsage(fmt::format("bad or duplicate {} connection index {}", rules_.kind, hello.index));
  }
  return slot;
}

Result<uint32_t> HelloAcceptor::slotOf(const net::FrameIo& io, const wire::P2PHello& hello) const {
  // Which sender: the first, or one of the others (their slots follow).
  const wire::SignKey* key = nullptr;
  uint32_t base = 0, connections = 0;
  const bool reverse = (hello.flags & wire::kHelloReverse) != 0;
  if (hello.sender_id == round_.sender && round_.connections != 0 && !reverse) {
    key = &round_.sender_key;
    connections = round_.connections;
  } else {
    base = round_.connections;
    for (const Sender& m : round_.more) {
      if (m.id == hello.sender_id && m.reverse == reverse) {
        key = &m.key;
        connections = m.connections;
        break;
      }
      base += m.connections;
    }
  }
  if (key == nullptr) return rules_.refuse(hello, round_.id);
  PCCL_RETURN_IF_ERROR(verifyHello(io, hello, *key, rules_.kind, rules_.listed_for(round_.id)));
  if (hello.index >= connections) {
    return Status::invalidUsage(fmt::format("bad or duplicate {} connection index {}", rules_.kind, hello.index));
  }
  return base + hello.index;
}

}  // namespace pccl::peer
