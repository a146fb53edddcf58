#include "wire/bytes.hpp"

#include <cstring>
#include <string>

namespace pccl::wire {

void ByteWriter::bytes(const void* data, size_t n) {
  const auto* b = static_cast<const uint8_t*>(data);
  out_->insert(out_->end(), b, b + n);
}

void ByteWriter::str(const std::string& s) {
  size_t n = s.size() < ByteReader::kMaxString ? s.size() : ByteReader::kMaxString;
  u16(static_cast<uint16_t>(n));
  bytes(s.data(), n);
}

Status ByteReader::need(size_t n) const {
  if (remaining() < n) {
    return Status::protocol("truncated message: need " + std::to_string(n) + " more bytes, have " +
                            std::to_string(remaining()));
  }
  return Status::ok();
}

uint64_t ByteReader::getLe(int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
  p_ += n;
  return v;
}

Status ByteReader::u8(uint8_t* v) {
  PCCL_RETURN_IF_ERROR(need(1));
  *v = static_cast<uint8_t>(getLe(1));
  return Status::ok();
}
Status ByteReader::u16(uint16_t* v) {
  PCCL_RETURN_IF_ERROR(need(2));
  *v = static_cast<uint16_t>(getLe(2));
  return Status::ok();
}
Status ByteReader::u32(uint32_t* v) {
  PCCL_RETURN_IF_ERROR(need(4));
  *v = static_cast<uint32_t>(getLe(4));
  return Status::ok();
}
Status ByteReader::u64(uint64_t* v) {
  PCCL_RETURN_IF_ERROR(need(8));
  *v = getLe(8);
  return Status::ok();
}

Status ByteReader::bytes(void* out, size_t n) {
  PCCL_RETURN_IF_ERROR(need(n));
  if (n > 0) std::memcpy(out, p_, n);
  p_ += n;
  return Status::ok();
}

Status ByteReader::str(std::string* s, size_t max_len) {
  uint16_t n = 0;
  PCCL_RETURN_IF_ERROR(u16(&n));
  if (n > max_len) {
    return Status::protocol("string of " + std::to_string(n) + " bytes exceeds limit " + std::to_string(max_len));
  }
  PCCL_RETURN_IF_ERROR(need(n));
  s->assign(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return Status::ok();
}

Status ByteReader::count(uint32_t* n, size_t min_item_bytes) {
  PCCL_RETURN_IF_ERROR(u32(n));
  if (min_item_bytes > 0 && *n > remaining() / min_item_bytes) {
    return Status::protocol("list of " + std::to_string(*n) + " items cannot fit in " +
                            std::to_string(remaining()) + " remaining bytes");
  }
  return Status::ok();
}

Status ByteReader::expectEnd() const {
  if (remaining() != 0) {
    return Status::protocol(std::to_string(remaining()) + " unexpected trailing bytes in message");
  }
  return Status::ok();
}

}  // namespace pccl::wire
