#include "util/secret.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace pccl {

Result<std::string> readSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::invalidArgument("cannot read secret file '" + path + "': " + std::strerror(errno));
  }
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  if (s.empty()) return Status::invalidArgument("secret file '" + path + "' is empty");
  return s;
}

Result<std::string> resolveSecret(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("PCCL_SECRET"); env != nullptr && *env != '\0') return std::string(env);
  if (const char* file = std::getenv("PCCL_SECRET_FILE"); file != nullptr && *file != '\0') {
    return readSecretFile(file);
  }
  return std::string();
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

}  // namespace pccl
