// libFuzzer harness: the bytes a peer or the master reads off a control or ring connection.
// The input is a frame (20-byte header, then a payload). The header is decoded with the control
// limit; when it is good, its payload is dispatched to a decoder of every message type (as the
// master and the peers do). Independently, every message decoder, the data header and the
// shared-state request decoder run on the bytes after the header. Invariants (a crash is a bug):
// no decoder reads out of bounds (ASan), no undefined behaviour (UBSan), every failure is a
// ProtocolError or VersionMismatch with a message, and whatever a decoder accepts re-encodes to the
// same bytes. The same frame is also opened as a sealed frame of an encrypted connection (both
// ciphers): it must fail authentication cleanly, whatever its length field says.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "net/link.hpp"
#include "peer/state_transfer.hpp"
#include "wire/data.hpp"
#include "wire/dispatch.hpp"
#include "wire/frame.hpp"
#include "wire_message_list.hpp"

using namespace pccl;
using namespace pccl::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void checkFailure(const Status& s) {
  require(!s.isOk() && !s.message().empty());
  require(s.code() == Code::kProtocolError || s.code() == Code::kVersionMismatch);
}

template <typename M>
void decodeOne(const uint8_t* p, size_t n) {
  auto m = decodePayload<M>(p, n);
  if (!m.isOk()) return checkFailure(m.status());
  std::vector<uint8_t> again;
  ByteWriter w(&again);
  m->encode(w);
  require(again.size() == n && std::equal(again.begin(), again.end(), p));
}

const Dispatcher& dispatcher() {
  static const Dispatcher d = [] {
    Dispatcher x;
    forEachMessage([&](auto tag) {
      using M = typename decltype(tag)::type;
      x.on<M>([](const FrameHeader&, const M&) { return Status::ok(); });
    });
    return x;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = decodeHeader(data, size, kMaxControlPayload);
  if (!h.isOk()) {
    checkFailure(h.status());
  } else if (size >= kHeaderSize + h->length) {
    // Exactly sized, so ASan sees any read past the payload.
    std::vector<uint8_t> payload(data + kHeaderSize, data + kHeaderSize + h->length);
    Status s = dispatcher().dispatch(*h, payload.data(), payload.size());
    if (!s.isOk()) checkFailure(s);
  }
  if (size < kHeaderSize) return 0;
  auto sealed = decodeHeader(data, size, kMaxControlPayload + pccl::net::kAeadTagBytes);
  if (sealed.isOk() && size >= kHeaderSize + sealed->length) {
    for (auto cipher : {pccl::net::Cipher::kAes256Gcm, pccl::net::Cipher::kChaCha20Poly1305}) {
      pccl::net::SessionCrypto crypto;
      crypto.send = std::make_unique<pccl::net::AeadStream>(cipher, pccl::net::AeadKey{});
      crypto.recv = std::make_unique<pccl::net::AeadStream>(cipher, pccl::net::AeadKey{});
      HeaderBytes raw{};
      std::copy(data, data + kHeaderSize, raw.begin());
      std::vector<uint8_t> payload(data + kHeaderSize, data + kHeaderSize + sealed->length);
      FrameHeader fh = *sealed;
      checkFailure(pccl::net::openFrame(crypto, raw, fh, payload.data()));
    }
  }
  const std::vector<uint8_t> rest(data + kHeaderSize, data + size);
  forEachMessage([&](auto tag) { decodeOne<typename decltype(tag)::type>(rest.data(), rest.size()); });
  auto d = decodeDataHeader(rest.data(), rest.size());
  if (!d.isOk()) checkFailure(d.status());
  auto lo = decodeLendOffer(rest.data(), rest.size());
  if (!lo.isOk()) checkFailure(lo.status());
  auto lr = decodeLendRecord(rest.data(), rest.size());
  if (!lr.isOk()) checkFailure(lr.status());
  auto lg = decodeLendRegion(rest.data(), rest.size());
  if (!lg.isOk()) checkFailure(lg.status());
  auto q = peer::decodeStateRequest(rest.data(), rest.size());
  if (!q.isOk()) checkFailure(q.status());
  return 0;
}
