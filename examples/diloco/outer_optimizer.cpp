#include "outer_optimizer.hpp"

namespace diloco {

void OuterOptimizer::step(std::vector<float>& theta, const float* pseudo_grad, size_t begin, size_t count) {
  for (size_t j = 0; j < count; ++j) {
    const size_t i = begin + j;
    float v = momentum_ * velocity_[i] + pseudo_grad[j];
    velocity_[i] = v;
    theta[i] -= lr_ * (pseudo_grad[j] + momentum_ * v);
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
