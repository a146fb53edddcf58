// Built instead of gloo_backend.cpp when Debian's libgloo-dev is not installed: Gloo rows are refused.
#include "gloo_backend.hpp"

namespace pccl::bench {

struct GlooBackend::Impl {};
GlooBackend::GlooBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GlooBackend::~GlooBackend() = default;

std::unique_ptr<GlooBackend> GlooBackend::create(const std::string&, uint16_t, const std::string&, int, int,
                                                 const std::string&, std::string* error) {
  *error = "this pccl-bench was built without Gloo (apt-get install libgloo-dev, then rebuild)";
  return nullptr;
}
bool GlooBackend::supports(DataType) { return true; }
const std::vector<std::string>& GlooBackend::algorithms() {
  static const std::vector<std::string> kNone;
  return kNone;
}
bool GlooBackend::allreduce(const std::string&, DataType, const void*, void*, size_t, std::string* error) {
  *error = "no Gloo in this build";
  return false;
}
void GlooBackend::release() {}
bool GlooBackend::broadcast(DataType, void*, size_t, std::string* error) {
  *error = "no Gloo in this build";
  return false;
}
bool GlooBackend::allgather(DataType, const void*, void*, size_t, std::string* error) {
  *error = "no Gloo in this build";
  return false;
}
bool GlooBackend::barrier(std::string* error) {
  *error = "no Gloo in this build";
  return false;
}

}  // namespace pccl::bench
