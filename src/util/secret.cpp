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

}  // namespace pccl
