// Explicit little-endian encoding. ByteWriter appends; ByteReader is bounds-checked and never reads
// past its span: every failed read leaves it in an error state and returns a Status.
#ifndef PCCL_WIRE_BYTES_HPP_
#define PCCL_WIRE_BYTES_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pccl/status.hpp"

namespace pccl::wire {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}

  void u8(uint8_t v) { out_->push_back(v); }
  void u16(uint16_t v) { putLe(v, 2); }
  void u32(uint32_t v) { putLe(v, 4); }
  void u64(uint64_t v) { putLe(v, 8); }
  void bytes(const void* data, size_t n);
  template <size_t N>
  void fixed(const std::array<uint8_t, N>& a) { bytes(a.data(), N); }
  // u16 length + bytes. Callers keep strings under the decoder's limit (kMaxString).
  void str(const std::string& s);

 private:
  void putLe(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>* out_;
};

class ByteReader {
 public:
  static constexpr size_t kMaxString = 4096;

  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  Status u8(uint8_t* v);
  Status u16(uint16_t* v);
  Status u32(uint32_t* v);
  Status u64(uint64_t* v);
  Status bytes(void* out, size_t n);
  template <size_t N>
  Status fixed(std::array<uint8_t, N>* a) { return bytes(a->data(), N); }
  Status str(std::string* s, size_t max_len = kMaxString);
  // A count of items each at least `min_item_bytes` long: rejects counts the remaining bytes
  // cannot hold, so a hostile count never drives an allocation.
  Status count(uint32_t* n, size_t min_item_bytes);
  // Decoders call this last: trailing bytes are a protocol error.
  Status expectEnd() const;
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  Status need(size_t n) const;
  uint64_t getLe(int n);
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace pccl::wire

#endif  // PCCL_WIRE_BYTES_HPP_
