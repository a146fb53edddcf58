#include "net/data_channel.hpp"

#include <fmt/format.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <utility>

#include "net/lending.hpp"
#include "net/tcp_rto.hpp"
#include "net/tcp_window.hpp"
#include "util/log.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

DataChannel::DataChannel(Link link, uint64_t epoch, std::string name)
    : socket_(std::move(link.socket)),
      crypto_(std::move(link.crypto)),
      epoch_(epoch),
      name_(std::move(name)),
      session_(link.session) {
  // Kernel buffer sizes are left to TCP autotuning (net.ipv4.tcp_rmem/tcp_wmem): setting SO_SNDBUF or
  // SO_RCVBUF would switch autotuning off and cap them at net.core.*mem_max, too small for long fat pipes.
  applySocketOptions();
}

void DataChannel::applySocketOptions() {
  tuneSocket(socket_);
  capRetransmitBackoff(socket_.native_handle());
  if (resumable_) probeWhenIdle(socket_.native_handle());  // an idle end learns of a reset (tcp_rto.hpp)
  setNotSentLowat(notsent_lowat_);
  setMaxPacingRate(pacing_rate_);
}

void DataChannel::setNotSentLowat(uint32_t bytes) {
  if (bytes == 0) return;
  notsent_lowat_ = bytes;
  const int v = static_cast<int>(std::min<uint32_t>(bytes, 1u << 30));
  (void)setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v));
}

void DataChannel::setMaxPacingRate(uint64_t bytes_per_second) {
  if (bytes_per_second == 0) return;
  pacing_rate_ = bytes_per_second;
  const unsigned long long v = bytes_per_second;
  (void)setsockopt(socket_.native_handle(), SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof(v));
}

uint64_t DataChannel::minRttUs() const {
  TcpWindow w;
  return readTcpWindow(const_cast<Tcp::socket&>(socket_).native_handle(), &w) ? w.min_rtt_us : 0;
}

int64_t DataChannel::sendRoom() const {
  const int fd = const_cast<Tcp::socket&>(socket_).native_handle();
  TcpWindow w;
  if (closed_ || broken_ || !readTcpWindow(fd, &w)) return kUnknownRoom;
  if (restarts_ < 0) restarts_ = restartsAfterIdle(fd) ? 1 : 0;
  return net::sendRoom(w, restarts_ == 1);
}

bool DataChannel::tcpWindow(TcpWindow* w) const {
  if (closed_ || broken_) return false;
  return readTcpWindow(const_cast<Tcp::socket&>(socket_).native_handle(), w);
}

DataChannel::~DataChannel() {
  asio::error_code ec;
  socket_.close(ec);
}

void DataChannel::start(DataSink* sink) {
  sink_ = sink;
  if (lend_ok_) {
    slot_ = std::make_unique<LendSlot>();
    const auto offer = wire::encodeLendOffer(makeLendOffer(session_, role_, slot_.get()));
    sendLinkFrame(wire::kDataLendOffer, std::vector<uint8_t>(offer.begin(), offer.end()));
  }
  readHead();
  armStallCheck();
}

void DataChannel::readHead() {
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(head_.data(), headBytes()),
                   [this, self, gen = gen_](const asio::error_code& ec, size_t) {
    if (stale(gen)) return;
    if (ec) {
      return lost(Status::peerLost(ec == asio::error::eof ? name_ + " closed the connection"
                                                          : name_ + ": " + ec.message()));
    }
    const uint32_t tags = 2 * sealOverhead(crypto_);
    auto h = wire::decodeHeader(head_.data(), wire::kHeaderSize, wire::kDataHeaderSize + wire::kMaxDataPayload + tags);
    if (!h.isOk()) return close(h.status().withContext(name_));
    if (h->type != static_cast<uint16_t>(wire::MsgType::kData) || h->length < wire::kDataHeaderSize + tags) {
      return close(Status::protocol(fmt::format("{}: unexpected {} frame on a ring connection", name_,
                                                wire::msgTypeName(h->type))));
    }
    if (h->epoch != epoch_) {
      return close(Status::protocol(fmt::format("{}: data frame of epoch {} on a ring of epoch {}", name_, h->epoch, epoch_)));
    }
    Status opened = openHead();
    if (!opened.isOk()) return close(opened.withContext(name_));
    auto d = wire::decodeDataHeader(head_.data() + wire::kHeaderSize, wire::kDataHeaderSize);
    if (!d.isOk()) return close(d.status().withContext(name_));
    current_ = *d;
    current_bytes_ = h->length - static_cast<uint32_t>(wire::kDataHeaderSize) - tags;
    if ((current_.flags & wire::kDataLinkFlags) != 0) return readLinkFrame();
    placeAndRead();
  });
}

Status DataChannel::openHead() {
  if (!crypto_.on()) return Status::ok();
  AeadTag tag{};
  std::copy_n(head_.data() + wire::kHeaderSize + wire::kDataHeaderSize, kAeadTagBytes, tag.data());
  return crypto_.recv->open(head_.data(), wire::kHeaderSize, head_.data() + wire::kHeaderSize, wire::kDataHeaderSize,
                            tag);
}

void DataChannel::resume() {
  if (!paused_ || closed_ || broken_) return;
  paused_ = false;
  placeAndRead();
}

void DataChannel::placeAndRead() {
  auto p = sink_->place(*this, current_, current_bytes_);
  if (!p.isOk()) return close(p.status());
  if (p->kind == Placement::Kind::kPause) {
    paused_ = true;
    return;
  }
  if (reading_lent_) return copyLent(*p);
  if (p->kind == Placement::Kind::kDiscard) return discardRest(current_bytes_ + sealOverhead(crypto_));
  uint8_t* dst = p->ptr;
  if (p->kind == Placement::Kind::kStage) {
    if (staging_.size() < current_bytes_) staging_.resize(current_bytes_);
    dst = staging_.data();
  }
  placed_ = true;
  auto self = shared_from_this();
  std::array<asio::mutable_buffer, 2> bufs{asio::buffer(dst, current_bytes_),
                                           asio::buffer(payload_tag_.data(), sealOverhead(crypto_))};
  asio::async_read(socket_, bufs, [this, self, dst, gen = gen_](const asio::error_code& ec, size_t) {
    if (stale(gen)) return;
    if (ec) return lost(Status::peerLost(name_ + ": " + ec.message()));
    if (crypto_.on()) {
      // Authenticated before anyone sees it.
      Status opened = crypto_.recv->open(head_.data(), wire::kHeaderSize, dst, current_bytes_, payload_tag_);
      if (!opened.isOk()) return close(opened.withContext(name_));
    }
    bytes_received_ += current_bytes_;
    placed_ = false;
    Status s = sink_->deliver(*this, current_, dst, current_bytes_);
    if (!s.isOk()) return close(s);
    frameTaken();
    if (!closed_ && !broken_) readHead();
  });
}

void DataChannel::discardRest(uint32_t left) {
  if (left == 0) {
    if (crypto_.on()) {
      Status skipped = crypto_.recv->skip();  // keeps the nonces in step
      if (!skipped.isOk()) return close(skipped.withContext(name_));
    }
    bytes_received_ += current_bytes_;
    Status s = sink_->discarded(*this, current_, current_bytes_);
    if (!s.isOk()) return close(s);
    frameTaken();
    if (!closed_ && !broken_) readHead();
    return;
  }
  discard_.resize(kDiscardChunk);
  const uint32_t n = std::min<uint32_t>(left, kDiscardChunk);
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(discard_.data(), n),
                   [this, self, left, n, gen = gen_](const asio::error_code& ec, size_t) {
    if (stale(gen)) return;
    if (ec) return lost(Status::peerLost(name_ + ": " + ec.message()));
    discardRest(left - n);
  });
}

void DataChannel::send(const wire::DataHeader& h, const uint8_t* payload, uint32_t bytes, SendDone done,
                       const wire::LendRegion& region) {
  if (closed_) {
    done(Status::peerLost(name_ + " is closed"));
    return;
  }
  // Lent: the frame carries where the elements are; the caller keeps them unchanged (enableLending()).
  // Only from inside a region of the operation, announced to the remote before the first record in it.
  if (lending_ && bytes >= kLendMinBytes && (h.flags & ~wire::kDataCompressed) == 0 &&
      region.contains(reinterpret_cast<uintptr_t>(payload), bytes)) {
    auto& announced = regions_out_[{h.op_id, h.seq}];
    const bool known = std::any_of(announced.begin(), announced.end(), [&](const wire::LendRegion& r) {
      return r.addr == region.addr && r.bytes == region.bytes;
    });
    if (!known) {
      announced.push_back(region);
      const auto reg = wire::encodeLendRegion(region);
      sendLinkFrame(wire::kDataLendRegion, std::vector<uint8_t>(reg.begin(), reg.end()), h.op_id, h.seq);
    }
    wire::DataHeader lent = h;
    lent.flags |= wire::kDataLent;
    Pending p{wire::encodeDataFrameHead(lent, epoch_, wire::kLendRecordSize), payload, bytes, std::move(done),
              h.op_id, h.seq, nullptr};
    p.lent = true;
    p.rec = wire::encodeLendRecord({reinterpret_cast<uintptr_t>(payload), bytes});
    return enqueue(std::move(p));
  }
  enqueue(Pending{wire::encodeDataFrameHead(h, epoch_, bytes), payload, bytes, std::move(done), h.op_id, h.seq, nullptr});
}

void DataChannel::operationEnded(uint64_t op_id, uint32_t seq) {
  if (resumable_) log_.retire(op_id, seq);
  auto it = regions_out_.find({op_id, seq});
  if (it == regions_out_.end()) return;
  regions_out_.erase(it);
  sendLinkFrame(wire::kDataLendRetire, {}, op_id, seq);
}

void DataChannel::enqueue(Pending p) {
  queued_bytes_ += p.bytes;
  out_.push_back(std::move(p));
  if (!writing_) writeNext();
}

void DataChannel::sendOwned(const wire::DataHeader& h, std::vector<uint8_t> payload) {
  if (closed_) return;
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(payload));
  const auto bytes = static_cast<uint32_t>(owned->size());
  enqueue(Pending{wire::encodeDataFrameHead(h, epoch_, bytes), owned->data(), bytes, [](const Status&) {}, h.op_id,
                  h.seq, owned});
}

size_t DataChannel::cancelQueued(uint64_t op_id, uint32_t seq, const Status& why) {
  std::vector<Pending> taken;
  auto it = out_.begin();
  if (writing_ && it != out_.end()) ++it;  // being written: its bytes are already on their way
  while (it != out_.end()) {
    if (it->op_id == op_id && it->seq == seq && !it->owned) {
      queued_bytes_ -= it->bytes;
      taken.push_back(std::move(*it));
      it = out_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& p : taken) p.done(why);
  return taken.size();
}

void DataChannel::writeNext() {
  if (out_.empty() || closed_ || broken_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  if (resumable_ && !out_.front().link) {
    Pending& f = out_.front();
    if (f.number == 0) f.number = log_.assign();
    if (f.number != wire_next_) {
      // A gap (frames of operations that ended here were dropped after a resume): say where we are.
      wire_next_ = f.number;
      out_.push_front(nextSeqFrame(f.number));
    } else {
      ++wire_next_;
    }
  }
  Pending& p = out_.front();
  // Copied out of the queue: cancelQueued() may erase from its middle (moving the front) meanwhile.
  const uint8_t* payload = p.payload;
  uint32_t bytes = p.bytes;
  if (p.lent) {
    rec_out_ = p.rec;
    payload = rec_out_.data();
    bytes = static_cast<uint32_t>(rec_out_.size());
  }
  std::copy(p.head.begin(), p.head.end(), sealed_head_.begin());
  if (crypto_.on()) return writeSealed(payload, bytes);
  std::array<asio::const_buffer, 2> bufs{asio::buffer(sealed_head_.data(), p.head.size()), asio::buffer(payload, bytes)};
  auto self = shared_from_this();
  asio::async_write(socket_, bufs, [this, self, gen = gen_](const asio::error_code& ec, size_t) {
    if (!stale(gen)) written(ec);
  });
}

void DataChannel::writeSealed(const uint8_t* payload, uint32_t bytes) {
  // Sealed here, in write order, so the receiver's nonce counter meets them in the same order.
  wire::setHeaderLength(sealed_head_.data(), static_cast<uint32_t>(wire::kDataHeaderSize + bytes + 2 * kAeadTagBytes));
  AeadTag tag{};
  Status s = crypto_.send->seal(sealed_head_.data(), wire::kHeaderSize, sealed_head_.data() + wire::kHeaderSize,
                                wire::kDataHeaderSize, &tag);
  std::copy(tag.begin(), tag.end(), sealed_head_.data() + wire::kHeaderSize + wire::kDataHeaderSize);
  if (sealed_.size() < bytes + kAeadTagBytes) sealed_.resize(bytes + kAeadTagBytes);
  if (s.isOk()) s = crypto_.send->sealTo(sealed_head_.data(), wire::kHeaderSize, payload, bytes, sealed_.data(), &tag);
  if (!s.isOk()) return close(s.withContext(name_));
  std::copy(tag.begin(), tag.end(), sealed_.data() + bytes);
  std::array<asio::const_buffer, 2> bufs{asio::buffer(sealed_head_), asio::buffer(sealed_.data(), bytes + kAeadTagBytes)};
  auto self = shared_from_this();
  asio::async_write(socket_, bufs, [this, self, gen = gen_](const asio::error_code& ec, size_t) {
    if (!stale(gen)) written(ec);
  });
}

void DataChannel::written(const asio::error_code& ec) {
  if (ec) return lost(Status::peerLost(name_ + ": " + ec.message()));
  Pending done = std::move(out_.front());
  out_.pop_front();
  queued_bytes_ -= done.bytes;
  if (done.resend) {
    resent_bytes_ += done.bytes;
  } else if (!done.link) {
    bytes_sent_ += done.bytes;
  }
  if (done.number != 0) {
    log_.written(ResendLog::Entry{done.number, done.head, done.payload, done.bytes, done.op_id, done.seq, done.owned});
  }
  done.done(Status::ok());
  writeNext();
  if (!writing_ && !closed_ && !broken_ && on_idle_) on_idle_();
}

// ---- lending (net/lending.hpp) --------------------------------------------------------------------

DataChannel::Pending DataChannel::linkFrame(uint32_t flag, std::vector<uint8_t> payload, uint64_t op_id,
                                            uint32_t seq) const {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(payload));
  const auto bytes = static_cast<uint32_t>(owned->size());
  wire::DataHeader h = wire::dataHeader(op_id, 0, flag, 0);
  h.seq = seq;
  Pending p{wire::encodeDataFrameHead(h, epoch_, bytes), owned->data(), bytes, [](const Status&) {}, op_id, seq, owned};
  p.link = true;
  return p;
}

void DataChannel::sendLinkFrame(uint32_t flag, std::vector<uint8_t> payload, uint64_t op_id, uint32_t seq) {
  if (closed_) return;
  enqueue(linkFrame(flag, std::move(payload), op_id, seq));
}

// A frame the channel consumes itself: its small payload, then what it says.
void DataChannel::readLinkFrame() {
  uint32_t want = 0;
  switch (current_.flags & wire::kDataLinkFlags) {
    case wire::kDataLendOffer: want = wire::kLendOfferSize; break;
    case wire::kDataLendAccept: want = 0; break;
    case wire::kDataLendRegion: want = wire::kLendRegionSize; break;
    case wire::kDataLendRetire: want = 0; break;
    case wire::kDataAck:
    case wire::kDataNextSeq: want = wire::kResumeValueSize; break;
    default: want = wire::kLendRecordSize; break;
  }
  if (current_bytes_ != want) {
    return close(Status::protocol(fmt::format("{}: lending frame (flags {}) of {} bytes, expected {}", name_,
                                              current_.flags, current_bytes_, want)));
  }
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(link_in_.data(), want + sealOverhead(crypto_)),
                   [this, self, want, gen = gen_](const asio::error_code& ec, size_t) {
                     if (stale(gen)) return;
                     if (ec) return lost(Status::peerLost(name_ + ": " + ec.message()));
                     if (crypto_.on()) {
                       AeadTag tag{};
                       std::copy_n(link_in_.data() + want, kAeadTagBytes, tag.data());
                       Status opened = crypto_.recv->open(head_.data(), wire::kHeaderSize, link_in_.data(), want, tag);
                       if (!opened.isOk()) return close(opened.withContext(name_));
                     }
                     Status s = onLinkFrame(link_in_.data(), want);
                     if (!s.isOk()) return close(s.withContext(name_));
                     if (closed_) return;
                     if (reading_lent_) return placeAndRead();
                     readHead();
                   });
}

Status DataChannel::onLinkFrame(const uint8_t* payload, uint32_t bytes) {
  switch (current_.flags & wire::kDataLinkFlags) {
    case wire::kDataLendOffer: {
      PCCL_ASSIGN_OR_RETURN(wire::LendOffer offer, wire::decodeLendOffer(payload, bytes));
      if (offered_) return Status::protocol("a second lend offer");
      offered_ = true;
      if (!lend_ok_) return Status::ok();  // not a same-host link to us, or lending is off here
      const LendRole offerer = role_ == LendRole::kDialer ? LendRole::kAcceptor : LendRole::kDialer;
      Status probed = probeLender(offer, session_, offerer, slot_.get());
      if (!probed.isOk()) {
        PCCL_LOG_DEBUG("net", "{}: its lend offer is declined (frames stay on the socket): {}", name_, probed.toString());
        return Status::ok();
      }
      lender_pid_ = offer.pid;
      sendLinkFrame(wire::kDataLendAccept, {});
      return Status::ok();
    }
    case wire::kDataLendAccept:
      if (!lend_ok_ || lending_) return Status::protocol("a lend accept for no offer");
      lending_ = true;
      return Status::ok();
    case wire::kDataLendRegion: {
      if (lender_pid_ == 0) return Status::protocol("a lend region without an accepted offer");
      PCCL_ASSIGN_OR_RETURN(wire::LendRegion reg, wire::decodeLendRegion(payload, bytes));
      auto& regions = regions_in_[{current_.op_id, current_.seq}];
      if (regions.size() >= kMaxLendRegionsPerOp || regions_in_count_ >= kMaxLendRegions) {
        return Status::protocol(fmt::format("more lend regions than {} per operation or {} in all",
                                            kMaxLendRegionsPerOp, kMaxLendRegions));
      }
      regions.push_back(reg);
      ++regions_in_count_;
      return Status::ok();
    }
    case wire::kDataAck:
    case wire::kDataNextSeq:
      return onResumeFrame(payload, bytes);
    case wire::kDataLendRetire: {
      auto it = regions_in_.find({current_.op_id, current_.seq});
      if (it == regions_in_.end()) return Status::protocol("a lend retire for an operation that announced no region");
      regions_in_count_ -= it->second.size();
      regions_in_.erase(it);
      return Status::ok();
    }
    default:
      return onLentRecord(payload, bytes);
  }
}

// A lent record is read only inside a region its operation announced: anything else is a protocol
// error that fails the connection, before a byte is read.
Status DataChannel::onLentRecord(const uint8_t* payload, uint32_t bytes) {
  if (lender_pid_ == 0) return Status::protocol("a lent payload without an accepted offer");
  PCCL_ASSIGN_OR_RETURN(wire::LendRecord rec, wire::decodeLendRecord(payload, bytes));
  auto it = regions_in_.find({current_.op_id, current_.seq});
  const bool inside = it != regions_in_.end() && std::any_of(it->second.begin(), it->second.end(),
                                                             [&](const wire::LendRegion& r) {
                                                               return r.contains(rec.addr, rec.bytes);
                                                             });
  if (!inside) {
    return Status::protocol(fmt::format("a lent record ({} bytes at {:#x}) of op {} seq {} outside the regions the "
                                        "lender announced for it",
                                        rec.bytes, rec.addr, current_.op_id, current_.seq));
  }
  reading_lent_ = true;
  lent_addr_ = rec.addr;
  current_bytes_ = rec.bytes;
  current_.flags &= ~wire::kDataLent;  // the sink sees the frame as if its elements had come inline
  return Status::ok();
}

// A lent frame, placed: its elements copied from the lender's memory (not when discarded), delivered.
void DataChannel::copyLent(const Placement& p) {
  uint8_t* dst = p.ptr;
  if (p.kind == Placement::Kind::kStage) {
    if (staging_.size() < current_bytes_) staging_.resize(current_bytes_);
    dst = staging_.data();
  } else if (p.kind == Placement::Kind::kDiscard) {
    dst = nullptr;
  }
  if (dst != nullptr) {
    Status read = readLent(lender_pid_, lent_addr_, dst, current_bytes_);
    if (!read.isOk()) {
      reading_lent_ = false;
      return close(read.withContext(name_));
    }
  }
  bytes_received_ += current_bytes_;
  Status s = dst != nullptr ? sink_->deliver(*this, current_, dst, current_bytes_) : Status::ok();
  reading_lent_ = false;
  if (!s.isOk()) return close(s);
  frameTaken();
  if (!closed_ && !broken_) readHead();
}

uint64_t DataChannel::backlog() const {
  if (broken_) return UINT64_MAX / 2;  // anything else first
  int unsent = 0;
  if (closed_ || ioctl(const_cast<Tcp::socket&>(socket_).native_handle(), SIOCOUTQ, &unsent) != 0) unsent = 0;
  return queued_bytes_ + static_cast<uint64_t>(unsent > 0 ? unsent : 0);
}

void DataChannel::close(const Status& why) {
  if (closed_) return;
  closed_ = true;
  broken_ = false;
  for (auto* t : {resume_timer_.get(), ack_timer_.get(), stall_timer_.get()}) {
    if (t != nullptr) t->cancel();
  }
  asio::error_code ec;
  socket_.shutdown(Tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  // Nothing reads the queued payloads after this point: their owners may reuse them.
  std::deque<Pending> pending = std::move(out_);
  out_.clear();
  queued_bytes_ = 0;
  for (auto& p : pending) p.done(why);
  if (sink_ != nullptr) sink_->channelClosed(*this, why);
}

}  // namespace pccl::net
