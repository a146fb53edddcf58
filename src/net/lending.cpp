#include "net/lending.hpp"

#include <fmt/format.h>
#include <sodium.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pccl::net {

wire::LendOffer makeLendOffer(std::array<uint8_t, 16>* token) {
  randombytes_buf(token->data(), token->size());
  wire::LendOffer o;
  o.pid = static_cast<uint32_t>(::getpid());
  o.token_addr = reinterpret_cast<uintptr_t>(token->data());
  o.token = *token;
  return o;
}

Status probeLender(const wire::LendOffer& offer) {
  std::array<uint8_t, 16> seen{};
  Status s = readLent(offer.pid, offer.token_addr, seen.data(), static_cast<uint32_t>(seen.size()));
  if (!s.isOk()) return s;
  if (sodium_memcmp(seen.data(), offer.token.data(), seen.size()) != 0) {
    return Status::invalidUsage(fmt::format("process {} holds other bytes at the offered address", offer.pid));
  }
  return Status::ok();
}

Status readLent(uint32_t pid, uint64_t addr, uint8_t* dst, uint32_t bytes) {
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{dst + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr + done)), bytes - done};
    const ssize_t n = ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      return Status::peerLost(fmt::format("reading {} lent bytes of process {}: {}", bytes, pid, std::strerror(err)));
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

}  // namespace pccl::net
