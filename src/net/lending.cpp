#include "net/lending.hpp"

#include <fmt/format.h>
#include <sodium.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

namespace pccl::net {

namespace {
std::mutex& slotsMutex() {
  static std::mutex mu;
  return mu;
}
std::set<uint64_t>& liveSlots() {  // addresses of this process's LendSlots
  static std::set<uint64_t> slots;
  return slots;
}
constexpr char kTokenLabel[] = "pccl lend token v1";
}  // namespace

LendSlot::LendSlot() {
  std::lock_guard<std::mutex> lk(slotsMutex());
  liveSlots().insert(reinterpret_cast<uintptr_t>(bytes_.data()));
}

LendSlot::~LendSlot() {
  std::lock_guard<std::mutex> lk(slotsMutex());
  liveSlots().erase(reinterpret_cast<uintptr_t>(bytes_.data()));
  sodium_memzero(bytes_.data(), bytes_.size());
}

bool LendSlot::isLiveSlot(uint64_t addr, const LendSlot* except) {
  if (except != nullptr && addr == reinterpret_cast<uintptr_t>(except->bytes_.data())) return false;
  std::lock_guard<std::mutex> lk(slotsMutex());
  return liveSlots().count(addr) != 0;
}

std::array<uint8_t, 16> lendToken(const SessionId& session, LendRole role, const std::array<uint8_t, 16>& nonce) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 16);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(kTokenLabel), sizeof kTokenLabel);
  crypto_generichash_update(&st, session.data(), session.size());
  const uint8_t r = static_cast<uint8_t>(role);
  crypto_generichash_update(&st, &r, 1);
  crypto_generichash_update(&st, nonce.data(), nonce.size());
  std::array<uint8_t, 16> out{};
  crypto_generichash_final(&st, out.data(), out.size());
  return out;
}

wire::LendOffer makeLendOffer(const SessionId& session, LendRole role, LendSlot* slot) {
  wire::LendOffer o;
  randombytes_buf(o.nonce.data(), o.nonce.size());
  const auto token = lendToken(session, role, o.nonce);
  std::memcpy(slot->data(), token.data(), token.size());
  o.pid = static_cast<uint32_t>(::getpid());
  o.token_addr = reinterpret_cast<uintptr_t>(slot->data());
  return o;
}

Status probeLender(const wire::LendOffer& offer, const SessionId& session, LendRole offerer, const LendSlot* self) {
  if (offer.pid == static_cast<uint32_t>(::getpid()) && !LendSlot::isLiveSlot(offer.token_addr, self)) {
    return Status::invalidUsage(
        fmt::format("the offer names this process ({}) at an address that is no lending slot of another connection",
                    offer.pid));
  }
  std::array<uint8_t, 16> seen{};
  Status s = readLent(offer.pid, offer.token_addr, seen.data(), static_cast<uint32_t>(seen.size()));
  if (!s.isOk()) return s;
  const auto want = lendToken(session, offerer, offer.nonce);
  if (sodium_memcmp(seen.data(), want.data(), seen.size()) != 0) {
    return Status::invalidUsage(fmt::format(
        "process {} holds other bytes at the offered address than this connection's token for that end", offer.pid));
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
