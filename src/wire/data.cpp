#include "wire/data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/messages.hpp"

namespace pccl::wire {

namespace {
void writeDesc(ByteWriter& w, const OpDesc& d) {
  w.u64(d.count);
  w.u32(d.segment_bytes);
  w.u8(d.dtype);
  w.u8(d.op);
  w.u8(d.quant);
  w.u8(d.compress);
  w.u8(d.algo);
  w.u8(d.kind);
  w.u32(d.root);
}

Status readDesc(ByteReader& r, OpDesc* d) {
  PCCL_RETURN_IF_ERROR(r.u64(&d->count));
  PCCL_RETURN_IF_ERROR(r.u32(&d->segment_bytes));
  PCCL_RETURN_IF_ERROR(r.u8(&d->dtype));
  PCCL_RETURN_IF_ERROR(r.u8(&d->op));
  PCCL_RETURN_IF_ERROR(r.u8(&d->quant));
  PCCL_RETURN_IF_ERROR(r.u8(&d->compress));
  PCCL_RETURN_IF_ERROR(r.u8(&d->algo));
  PCCL_RETURN_IF_ERROR(r.u8(&d->kind));
  PCCL_RETURN_IF_ERROR(r.u32(&d->root));
  if (d->kind > kMaxCollective) return Status::protocol(fmt::format("descriptor: unknown collective {}", d->kind));
  return Status::ok();
}
}  // namespace

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown";
}

std::array<uint8_t, kHeaderSize + kDataHeaderSize> encodeDataFrameHead(const DataHeader& d, uint64_t epoch,
                                                                       uint32_t payload_bytes) {
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kData);
  h.epoch = epoch;
  h.length = static_cast<uint32_t>(kDataHeaderSize) + payload_bytes;
  HeaderBytes hb = encodeHeader(h);
  std::vector<uint8_t> v;
  v.reserve(kDataHeaderSize);
  ByteWriter w(&v);
  w.u64(d.op_id);
  w.u32(d.phase);
  w.u32(d.flags);
  w.u64(d.offset);
  w.u32(d.seq);
  writeDesc(w, d.desc);
  std::array<uint8_t, kHeaderSize + kDataHeaderSize> out{};
  std::copy(hb.begin(), hb.end(), out.begin());
  std::copy(v.begin(), v.end(), out.begin() + kHeaderSize);
  return out;
}

Result<DataHeader> decodeDataHeader(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  DataHeader d;
  PCCL_RETURN_IF_ERROR(r.u64(&d.op_id));
  PCCL_RETURN_IF_ERROR(r.u32(&d.phase));
  PCCL_RETURN_IF_ERROR(r.u32(&d.flags));
  PCCL_RETURN_IF_ERROR(r.u64(&d.offset));
  PCCL_RETURN_IF_ERROR(r.u32(&d.seq));
  PCCL_RETURN_IF_ERROR(readDesc(r, &d.desc));
  if ((d.flags & ~kDataKnownFlags) != 0) return Status::protocol("data header: unknown flags set");
  const uint32_t link = d.flags & kDataLinkFlags;
  if (link != 0) {
    if ((link & (link - 1)) != 0) return Status::protocol("data header: more than one lending flag");
    if ((d.flags & ~(link | (link == kDataLent ? kDataCompressed : 0))) != 0) {
      return Status::protocol("data header: a lending flag with other flags");
    }
  }
  return d;
}

namespace {
template <size_t N>
std::array<uint8_t, N> toArray(const std::vector<uint8_t>& v) {
  std::array<uint8_t, N> out{};
  std::copy_n(v.begin(), N, out.begin());
  return out;
}

Status exactSize(size_t size, size_t want, const char* what) {
  if (size == want) return Status::ok();
  return Status::protocol(fmt::format("{} of {} bytes (expected {})", what, size, want));
}
}  // namespace

std::array<uint8_t, kLendOfferSize> encodeLendOffer(const LendOffer& o) {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  w.u32(o.pid);
  w.u64(o.token_addr);
  w.fixed(o.nonce);
  return toArray<kLendOfferSize>(v);
}

Result<LendOffer> decodeLendOffer(const uint8_t* data, size_t size) {
  PCCL_RETURN_IF_ERROR(exactSize(size, kLendOfferSize, "lend offer"));
  ByteReader r(data, size);
  LendOffer o;
  PCCL_RETURN_IF_ERROR(r.u32(&o.pid));
  PCCL_RETURN_IF_ERROR(r.u64(&o.token_addr));
  PCCL_RETURN_IF_ERROR(r.fixed(&o.nonce));
  return o;
}

std::array<uint8_t, kLendRecordSize> encodeLendRecord(const LendRecord& rec) {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  w.u64(rec.addr);
  w.u32(rec.bytes);
  return toArray<kLendRecordSize>(v);
}

Result<LendRecord> decodeLendRecord(const uint8_t* data, size_t size) {
  PCCL_RETURN_IF_ERROR(exactSize(size, kLendRecordSize, "lend record"));
  ByteReader r(data, size);
  LendRecord rec;
  PCCL_RETURN_IF_ERROR(r.u64(&rec.addr));
  PCCL_RETURN_IF_ERROR(r.u32(&rec.bytes));
  if (rec.bytes > kMaxDataPayload) return Status::protocol(fmt::format("lend record of {} bytes", rec.bytes));
  return rec;
}

std::array<uint8_t, kLendRegionSize> encodeLendRegion(const LendRegion& reg) {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  w.u64(reg.addr);
  w.u64(reg.bytes);
  return toArray<kLendRegionSize>(v);
}

Result<LendRegion> decodeLendRegion(const uint8_t* data, size_t size) {
  PCCL_RETURN_IF_ERROR(exactSize(size, kLendRegionSize, "lend region"));
  ByteReader r(data, size);
  LendRegion reg;
  PCCL_RETURN_IF_ERROR(r.u64(&reg.addr));
  PCCL_RETURN_IF_ERROR(r.u64(&reg.bytes));
  if (reg.bytes == 0 || reg.addr + reg.bytes < reg.addr) {
    return Status::protocol(fmt::format("lend region of {} bytes at {:#x}", reg.bytes, reg.addr));
  }
  return reg;
}

std::vector<uint8_t> encodeRingCtl(const RingCtl& c) {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  w.u8(c.kind);
  w.u32(c.value);
  w.u16(c.code);
  writeDesc(w, c.desc);
  w.str(c.reason.size() > kMaxRingCtlReason ? c.reason.substr(0, kMaxRingCtlReason) : c.reason);
  return v;
}

Result<RingCtl> decodeRingCtl(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  RingCtl c;
  PCCL_RETURN_IF_ERROR(r.u8(&c.kind));
  if (c.kind < RingCtl::kHello || c.kind > RingCtl::kAbort) {
    return Status::protocol("ring control frame: unknown kind " + std::to_string(c.kind));
  }
  PCCL_RETURN_IF_ERROR(r.u32(&c.value));
  PCCL_RETURN_IF_ERROR(r.u16(&c.code));
  PCCL_RETURN_IF_ERROR(readDesc(r, &c.desc));
  PCCL_RETURN_IF_ERROR(r.str(&c.reason, kMaxRingCtlReason));
  PCCL_RETURN_IF_ERROR(r.expectEnd());
  return c;
}

}  // namespace pccl::wire
