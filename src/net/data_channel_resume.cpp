// DataChannel, resuming (docs/protocol.md §5.4.3): numbering and acknowledgements, the break, and the
// new connection that takes over.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "net/data_channel.hpp"
#include "net/tcp_rto.hpp"
#include "net/tcp_window.hpp"
#include "util/log.hpp"
#include "wire/bytes.hpp"

namespace pccl::net {

namespace {
constexpr const char* kLog = "net";
// The receiver acknowledges after this many frames, or kAckDelay after the first one not acknowledged.
// What the sender keeps (by pointer) and would copy after a break is bounded by what it writes in that
// time; an acknowledgement is one 78-byte frame.
constexpr uint64_t kAckEvery = 64;
constexpr Millis kAckDelay{100};
constexpr Millis kMinStallCheck{100};

std::vector<uint8_t> u64Payload(uint64_t v) {
  std::vector<uint8_t> out;
  wire::ByteWriter(&out).u64(v);
  return out;
}
}  // namespace

void DataChannel::enableResume(ResumeOptions options) {
  resumable_ = true;
  resume_ = std::move(options);
  probeWhenIdle(socket_.native_handle());  // an idle end learns of a reset (net/tcp_rto.hpp)
  auto ex = socket_.get_executor();
  resume_timer_ = std::make_unique<asio::steady_timer>(ex);
  ack_timer_ = std::make_unique<asio::steady_timer>(ex);
  stall_timer_ = std::make_unique<asio::steady_timer>(ex);
}

void DataChannel::lost(const Status& why) {
  if (resumable_) return breakOff(why);
  close(why);
}

void DataChannel::breakOff(const Status& why) {
  if (closed_ || broken_) return;
  if (!resumable_) return close(why);
  broken_ = true;
  ++gen_;
  broken_at_ = Clock::now();
  asio::error_code ec;
  socket_.shutdown(Tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  writing_ = false;  // the frame being written (if any) keeps its number and is written again
  paused_ = false;
  ack_armed_ = false;
  ack_timer_->cancel();
  stall_timer_->cancel();
  if (placed_) {
    placed_ = false;
    if (sink_ != nullptr) sink_->abandoned(*this, current_);
  }
  PCCL_LOG_INFO(kLog, "{}: connection broke ({}); waiting up to {} ms for a new one", name_, why.message(),
                resume_.wait.count());
  std::weak_ptr<DataChannel> weak = weak_from_this();
  resume_timer_->expires_after(resume_.wait);
  resume_timer_->async_wait([weak, gen = gen_, why](const asio::error_code& e) {
    auto self = weak.lock();
    if (e || !self || self->stale(gen) || !self->broken_) return;
    self->close(Status::peerLost(fmt::format("{}: the connection broke ({}) and no new one took over within {} ms",
                                             self->name_, why.message(), self->resume_.wait.count())));
  });
  if (resume_.broken) resume_.broken(*this, why);
}

Status DataChannel::resumeOn(Link link, uint64_t remote_received) {
  if (closed_) return Status::peerLost(name_ + " is closed");
  if (!resumable_) return Status::internal(name_ + ": resuming a connection that does not resume");
  if (!broken_) breakOff(Status::peerLost("a new connection took over"));
  auto resend = log_.since(remote_received);
  if (!resend.isOk()) {
    Status why = resend.status().withContext(name_);
    close(why);
    return why;
  }
  // The new queue: what the remote lacks, then what was never written in full. A frame that was being
  // written when the connection broke and arrived whole is done; acknowledgements and gap markers are
  // made again when needed.
  std::vector<SendDone> completed;
  std::deque<Pending> rest;
  for (auto& p : out_) {
    if (p.link) continue;
    if (p.number != 0 && p.number <= remote_received) {
      if (!p.resend) bytes_sent_ += p.bytes;
      completed.push_back(std::move(p.done));
      continue;
    }
    rest.push_back(std::move(p));
  }
  out_.clear();
  queued_bytes_ = 0;
  uint64_t resent = 0;
  for (auto& e : *resend) {
    Pending p{e.head, e.payload, e.bytes, [](const Status&) {}, e.op_id, e.seq, std::move(e.owned)};
    p.number = e.number;
    p.resend = true;
    resent += e.bytes;
    queued_bytes_ += p.bytes;
    out_.push_back(std::move(p));
  }
  for (auto& p : rest) {
    queued_bytes_ += p.bytes;
    out_.push_back(std::move(p));
  }
  socket_ = std::move(link.socket);
  crypto_ = std::move(link.crypto);
  session_ = link.session;
  applySocketOptions();
  const auto stalled = std::chrono::duration_cast<Millis>(Clock::now() - broken_at_);
  broken_ = false;
  ++gen_;
  resume_timer_->cancel();
  wire_next_ = remote_received + 1;
  ack_sent_ = recv_count_;  // the remote learnt our count with the new connection
  ++reconnects_;
  PCCL_LOG_INFO(kLog, "{}: resumed on a new connection after {} ms: {} frames ({} bytes) written again", name_,
                stalled.count(), resend->size(), resent);
  readHead();
  if (!writing_) writeNext();
  armStallCheck();
  for (auto& d : completed) d(Status::ok());
  if (resume_.resumed && !closed_) resume_.resumed(*this, resent, stalled);
  if (!closed_ && !broken_ && !writing_ && on_idle_) on_idle_();
  return Status::ok();
}

void DataChannel::frameTaken() {
  if (!resumable_) return;
  ++recv_count_;
  if (recv_count_ - ack_sent_ >= kAckEvery) return sendAck();
  if (ack_armed_ || broken_ || closed_) return;
  ack_armed_ = true;
  std::weak_ptr<DataChannel> weak = weak_from_this();
  ack_timer_->expires_after(kAckDelay);
  ack_timer_->async_wait([weak](const asio::error_code& e) {
    auto self = weak.lock();
    if (e || !self) return;
    self->ack_armed_ = false;
    self->sendAck();
  });
}

void DataChannel::sendAck() {
  if (closed_ || broken_ || recv_count_ == ack_sent_) return;
  ack_sent_ = recv_count_;
  sendLinkFrame(wire::kDataAck, u64Payload(recv_count_));
}

DataChannel::Pending DataChannel::nextSeqFrame(uint64_t number) const {
  return linkFrame(wire::kDataNextSeq, u64Payload(number));
}

Status DataChannel::onResumeFrame(const uint8_t* payload, uint32_t bytes) {
  if (!resumable_) return Status::protocol("a resume frame on a connection that does not resume");
  wire::ByteReader r(payload, bytes);
  uint64_t n = 0;
  PCCL_RETURN_IF_ERROR(r.u64(&n));
  if ((current_.flags & wire::kDataAck) != 0) return log_.acked(n);
  // kDataNextSeq: the frames before n were dropped by the sender (their operations ended there).
  if (n <= recv_count_) {
    return Status::protocol(fmt::format("the next frame is said to be {}, but {} were taken in", n, recv_count_));
  }
  recv_count_ = n - 1;
  return Status::ok();
}

void DataChannel::armStallCheck() {
  if (!resumable_ || resume_.stall.count() <= 0 || closed_ || broken_) return;
  std::weak_ptr<DataChannel> weak = weak_from_this();
  stall_timer_->expires_after(std::max(kMinStallCheck, resume_.stall / 4));
  stall_timer_->async_wait([weak, gen = gen_](const asio::error_code& e) {
    auto self = weak.lock();
    if (e || !self || self->stale(gen) || self->broken_) return;
    self->checkStall();
  });
}

// Bytes in flight and no acknowledgement from the remote's TCP for the stall time: the path went dark
// or a middlebox dropped the connection's state. (A remote that reads slowly still acknowledges: its
// window probes are answered.)
void DataChannel::checkStall() {
  TcpWindow w;
  if (readTcpWindow(socket_.native_handle(), &w) && w.unacked > 0 &&
      Millis(w.last_ack_ms) >= resume_.stall) {
    return breakOff(Status::peerLost(fmt::format("no acknowledgement for {} ms with data in flight", w.last_ack_ms)));
  }
  armStallCheck();
}

}  // namespace pccl::net
