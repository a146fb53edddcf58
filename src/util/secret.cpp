#include "util/secret.hpp"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace pccl {

namespace {
Status fileError(const std::string& path, int err) {
  return Status::invalidArgument("cannot read secret file '" + path + "': " + std::strerror(err));
}
}  // namespace

Status readSecretFile(const std::string& path, std::string* out) {
  wipeSecret(*out);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fileError(path, errno);
  // Reserved once, so appending never reallocates (which would free a copy without wiping it).
  out->reserve(kMaxSecretFileBytes + 1);
  char chunk[4096];
  Status st = Status::ok();
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = fileError(path, errno);
      break;
    }
    if (n == 0) break;
    if (out->size() + static_cast<size_t>(n) > kMaxSecretFileBytes) {
      st = Status::invalidArgument("secret file '" + path + "' is larger than " +
                                   std::to_string(kMaxSecretFileBytes) + " bytes");
      break;
    }
    out->append(chunk, static_cast<size_t>(n));
  }
  sodium_memzero(chunk, sizeof chunk);
  ::close(fd);
  if (!st.isOk()) {
    wipeSecret(*out);
    return st;
  }
  if (!out->empty() && out->back() == '\n') out->pop_back();
  if (!out->empty() && out->back() == '\r') out->pop_back();
  if (out->empty()) return Status::invalidArgument("secret file '" + path + "' is empty");
  return Status::ok();
}

Status resolveSecret(std::string* secret) {
  if (!secret->empty()) return Status::ok();
  if (const char* env = std::getenv("PCCL_SECRET"); env != nullptr && *env != '\0') {
    secret->assign(env);
    return Status::ok();
  }
  if (const char* file = std::getenv("PCCL_SECRET_FILE"); file != nullptr && *file != '\0') {
    return readSecretFile(file, secret);
  }
  return Status::ok();
}

Result<bool> resolveEncrypt(bool configured) {
  if (configured) return true;
  const char* env = std::getenv("PCCL_ENCRYPT");
  if (env == nullptr || *env == '\0') return false;
  const std::string v(env);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return Status::invalidArgument("PCCL_ENCRYPT must be 1/true/yes/on or 0/false/no/off, got '" + v + "'");
}

void wipeSecret(std::string& s) {
  s.resize(s.capacity());  // the whole allocation (or the in-object buffer), without reallocating
  sodium_memzero(s.data(), s.size());
  s.clear();
  s.shrink_to_fit();  // gives a heap buffer back, already wiped
}

}  // namespace pccl
