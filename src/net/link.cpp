#include "net/link.hpp"

#include <fmt/format.h>

#include <cstring>

namespace pccl::net {

Status sealFrame(SessionCrypto& crypto, std::vector<uint8_t>& frame) {
  if (!crypto.on()) return Status::ok();
  if (frame.size() < wire::kHeaderSize) return Status::internal("sealing a frame shorter than its header");
  const size_t n = frame.size() - wire::kHeaderSize;
  wire::setHeaderLength(frame.data(), static_cast<uint32_t>(n + kAeadTagBytes));
  AeadTag tag{};
  PCCL_RETURN_IF_ERROR(crypto.send->seal(frame.data(), wire::kHeaderSize, frame.data() + wire::kHeaderSize, n, &tag));
  frame.insert(frame.end(), tag.begin(), tag.end());
  return Status::ok();
}

Status openFrame(SessionCrypto& crypto, const wire::HeaderBytes& raw, wire::FrameHeader& h, uint8_t* payload) {
  if (!crypto.on()) return Status::ok();
  if (h.length < kAeadTagBytes) {
    return Status::protocol(fmt::format("{} frame of {} bytes on an encrypted connection: shorter than its tag",
                                        wire::msgTypeName(h.type), h.length));
  }
  const size_t n = h.length - kAeadTagBytes;
  AeadTag tag{};
  std::memcpy(tag.data(), payload + n, kAeadTagBytes);
  PCCL_RETURN_IF_ERROR(crypto.recv->open(raw.data(), raw.size(), payload, n, tag));
  h.length = static_cast<uint32_t>(n);
  return Status::ok();
}

}  // namespace pccl::net
