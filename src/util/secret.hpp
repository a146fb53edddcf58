// Where a run's shared secret comes from (explicit config, else PCCL_SECRET, else PCCL_SECRET_FILE), and
// how its raw bytes are wiped once the run key has been derived from them (docs/security.md §"What stays
// in memory"). Every function here fills or wipes the caller's string in place, so no stray copy of the
// secret is left in freed memory.
#ifndef PCCL_UTIL_SECRET_HPP_
#define PCCL_UTIL_SECRET_HPP_

#include <cstddef>
#include <string>

#include "pccl/status.hpp"

namespace pccl {

inline constexpr size_t kMaxSecretFileBytes = 64 * 1024;

// Reads a whole secret file (at most kMaxSecretFileBytes) into `*out`; one trailing "\n", then one "\r",
// is stripped so `echo s > f` works. Read with read(2) straight into `*out`: no stream buffer keeps a copy.
Status readSecretFile(const std::string& path, std::string* out);

// Leaves a non-empty `*secret` as it is; otherwise fills it from the environment, or leaves it empty
// (open run).
Status resolveSecret(std::string* secret);

// `configured` true wins; otherwise PCCL_ENCRYPT (1/true/yes/on or 0/false/no/off; anything else is an error).
Result<bool> resolveEncrypt(bool configured);

// Overwrites every byte `s` has allocated (sodium_memzero), then empties it.
void wipeSecret(std::string& s);

// Wipes a string when the scope ends, on every return path.
class WipeOnExit {
 public:
  explicit WipeOnExit(std::string& s) : s_(s) {}
  ~WipeOnExit() { wipeSecret(s_); }
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;

 private:
  std::string& s_;
};

}  // namespace pccl

#endif  // PCCL_UTIL_SECRET_HPP_
