#include "wire/probe_messages.hpp"

namespace pccl::wire {

void ProbePlan::encode(ByteWriter& w) const {
  w.u64(probe_id);
  w.u32(budget_ms);
  w.u64(max_bytes);
  w.u8(has_target ? 1 : 0);
  if (has_target) {
    encodeMember(w, target);
    w.u32(target_connections);
    w.u8(target_dials ? 1 : 0);
  }
  w.u8(has_source ? 1 : 0);
  if (has_source) {
    encodeMember(w, source);
    w.u32(source_connections);
    w.u8(dial_source ? 1 : 0);
  }
}

namespace {
Status flag(ByteReader& r, bool* out) {
  uint8_t v = 0;
  PCCL_RETURN_IF_ERROR(r.u8(&v));
  if (v > 1) return Status::protocol("flag byte must be 0 or 1");
  *out = v == 1;
  return Status::ok();
}

Status connections(ByteReader& r, uint32_t* out) {
  PCCL_RETURN_IF_ERROR(r.u32(out));
  if (*out == 0 || *out > 1024) return Status::protocol("probe connections outside 1..1024");
  return Status::ok();
}

}  // namespace

Result<ProbePlan> ProbePlan::decode(ByteReader& r) {
  ProbePlan m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.probe_id));
  PCCL_RETURN_IF_ERROR(r.u32(&m.budget_ms));
  PCCL_RETURN_IF_ERROR(r.u64(&m.max_bytes));
  if (m.max_bytes == 0) return Status::protocol("probe max_bytes must be at least 1");
  PCCL_RETURN_IF_ERROR(flag(r, &m.has_target));
  if (m.has_target) {
    PCCL_RETURN_IF_ERROR(decodeMember(r, &m.target));
    PCCL_RETURN_IF_ERROR(connections(r, &m.target_connections));
    PCCL_RETURN_IF_ERROR(flag(r, &m.target_dials));
  }
  PCCL_RETURN_IF_ERROR(flag(r, &m.has_source));
  if (m.has_source) {
    PCCL_RETURN_IF_ERROR(decodeMember(r, &m.source));
    PCCL_RETURN_IF_ERROR(connections(r, &m.source_connections));
    PCCL_RETURN_IF_ERROR(flag(r, &m.dial_source));
  }
  return m;
}

void ProbeReport::encode(ByteWriter& w) const {
  w.u64(probe_id);
  w.fixed(target_id);
  w.u64(rtt_us);
  w.u64(tx_bytes);
  w.fixed(source_id);
  w.u64(rx_bytes);
  w.u64(rx_rate);
  w.str(detail);
}

Result<ProbeReport> ProbeReport::decode(ByteReader& r) {
  ProbeReport m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.probe_id));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.target_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.rtt_us));
  PCCL_RETURN_IF_ERROR(r.u64(&m.tx_bytes));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.source_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.rx_bytes));
  PCCL_RETURN_IF_ERROR(r.u64(&m.rx_rate));
  PCCL_RETURN_IF_ERROR(r.str(&m.detail));
  return m;
}

void LinkQuery::encode(ByteWriter& w) const {
  w.u64(request_id);
  w.u32(first);
}

Result<LinkQuery> LinkQuery::decode(ByteReader& r) {
  LinkQuery m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.request_id));
  PCCL_RETURN_IF_ERROR(r.u32(&m.first));
  return m;
}

namespace {
constexpr size_t kLinkEntryBytes = 48;
}  // namespace

void LinkReport::encode(ByteWriter& w) const {
  w.u64(request_id);
  w.u64(epoch);
  w.u32(total);
  w.u32(first);
  w.u32(static_cast<uint32_t>(links.size()));
  for (const LinkEntry& e : links) {
    w.fixed(e.from);
    w.fixed(e.to);
    w.u64(e.bandwidth);
    w.u64(e.rtt_us);
  }
}

Result<LinkReport> LinkReport::decode(ByteReader& r) {
  LinkReport m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.request_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&m.total));
  PCCL_RETURN_IF_ERROR(r.u32(&m.first));
  uint32_t n = 0;
  PCCL_RETURN_IF_ERROR(r.count(&n, kLinkEntryBytes));
  if (n > kLinkReportPage) return Status::protocol("LinkReport page longer than 16384 links");
  if (static_cast<uint64_t>(m.first) + n > m.total) return Status::protocol("LinkReport page past its total");
  m.links.resize(n);
  for (LinkEntry& e : m.links) {
    PCCL_RETURN_IF_ERROR(r.fixed(&e.from));
    PCCL_RETURN_IF_ERROR(r.fixed(&e.to));
    PCCL_RETURN_IF_ERROR(r.u64(&e.bandwidth));
    PCCL_RETURN_IF_ERROR(r.u64(&e.rtt_us));
  }
  return m;
}

}  // namespace pccl::wire
