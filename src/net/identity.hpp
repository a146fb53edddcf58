// A peer's ring identity (docs/security.md §"Ring identities"): an Ed25519 key pair made when the
// communicator is created. Its public half travels in the JoinRequest; the master lists it with the
// id it assigned in every TopologyUpdate; the peer signs each ring hello with the secret half, over the
// connection's session id, so that its ring successor knows the connection comes from the member the
// master put before it — not from another holder of the run's secret, and not replayed from another
// connection. The secret half lives in locked memory (secret_key.hpp) and is wiped on destruction.
// Thread: immutable after construction; any thread.
#ifndef PCCL_NET_IDENTITY_HPP_
#define PCCL_NET_IDENTITY_HPP_

#include <cstddef>
#include <cstdint>

#include <vector>

#include "net/auth.hpp"
#include "net/secret_key.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

class SigningKey {
 public:
  SigningKey();  // a fresh key pair
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  const wire::SignKey& publicKey() const { return pk_; }
  wire::Signature sign(const uint8_t* msg, size_t n) const;

 private:
  wire::SignKey pk_{};
  LockedBytes sk_;
};

// True when `sig` is `pk`'s Ed25519 signature of msg[0..n).
bool verifySignature(const wire::SignKey& pk, const uint8_t* msg, size_t n, const wire::Signature& sig);

// What a resuming JoinRequest's signature covers (docs/protocol.md §8.8): a label, the session id of
// the control connection it travels on (so it cannot be replayed on another), and the resume record
// (run, term, member id, epoch, flags, ring). Signed with the member's ring key, it proves that the
// sender holds the key the run knows for that member.
std::vector<uint8_t> resumeProof(const SessionId& session, const wire::JoinRequest& m);

}  // namespace pccl::net

#endif  // PCCL_NET_IDENTITY_HPP_
