// Where a run's shared secret comes from: explicit config, else PCCL_SECRET, else PCCL_SECRET_FILE.
#ifndef PCCL_UTIL_SECRET_HPP_
#define PCCL_UTIL_SECRET_HPP_

#include <string>

#include "pccl/status.hpp"

namespace pccl {

// Reads a whole secret file; one trailing newline is stripped so `echo s > f` works.
Result<std::string> readSecretFile(const std::string& path);

// `configured` wins when non-empty; otherwise the environment; otherwise "" (open run).
Result<std::string> resolveSecret(const std::string& configured);

// `configured` true wins; otherwise PCCL_ENCRYPT (1/true/yes/on or 0/false/no/off; anything else is an error).
Result<bool> resolveEncrypt(bool configured);

}  // namespace pccl

#endif  // PCCL_UTIL_SECRET_HPP_
