// Collectives, the master's side: what a peer tells the master about its calls (docs/protocol.md
// §5.3). Nothing here is waited for. A call is announced only once it has run for kAnnounceAfter
// (one timer for all calls, armed by the first call made while it is idle), or earlier when it fails
// or falls in doubt; a call that commits sooner is never seen by the master, which on fast links is
// almost every call: two messages per call and peer less, and the master process stays asleep.
#include "collective/collectives.hpp"

namespace pccl::collective {

void Collectives::queueAnnounce(const OpKey& key) {
  unannounced_.push_back(key);
  if (announce_armed_) return;
  announce_armed_ = true;
  announce_timer_.expires_after(kAnnounceAfter);
  // Cancelled only by destruction: then nothing of `this` is touched.
  announce_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    announce_armed_ = false;
    announceWaiting();
  });
}

// Every call made since the timer was armed and still going is announced, in the order made.
void Collectives::announceWaiting() {
  std::vector<OpKey> keys;
  keys.swap(unannounced_);
  for (const OpKey& k : keys) {
    if (Op* op = find(k)) announce(*op);
  }
}

void Collectives::announce(Op& op) {
  if (op.announced || !ready()) return;
  op.announced = true;
  wire::OpAnnounce a;
  a.tag = op.key.tag;
  a.seq = op.key.seq;
  a.count = op.desc.count;
  a.dtype = op.desc.dtype;
  a.op = op.desc.op;
  a.quant = op.desc.quant;
  a.compress = op.desc.compress;
  a.epoch = op.key.epoch;
  a.segment_bytes = op.desc.segment_bytes;
  a.algo = op.desc.algo;
  a.kind = op.desc.kind;
  a.root = op.desc.root;
  link_->send(a, epoch_);
}

}  // namespace pccl::collective
