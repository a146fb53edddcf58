#include "outer_optimizer.hpp"

namespace diloco {

void OuterOptimizer::step(std::vector<float>& theta, const std::vector<float>& pseudo_grad) {
  for (size_t i = 0; i < theta.size(); ++i) {
    float v = momentum_ * velocity_[i] + pseudo_grad[i];
    velocity_[i] = v;
    theta[i] -= lr_ * (pseudo_grad[i] + momentum_ * v);
  }
}

uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace diloco
