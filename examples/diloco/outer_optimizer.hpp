// OuterOptimizer: DiLoCo's outer step, SGD with Nesterov momentum on one flat float32 vector.
// Plain loops in a fixed order, so workers that feed it the same bits compute the same bits.
#ifndef PCCL_EXAMPLES_DILOCO_OUTER_OPTIMIZER_HPP_
#define PCCL_EXAMPLES_DILOCO_OUTER_OPTIMIZER_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace diloco {

class OuterOptimizer {
 public:
  OuterOptimizer(size_t count, float lr, float momentum) : velocity_(count, 0.0f), lr_(lr), momentum_(momentum) {}

  // theta -= lr * (g + momentum * v), with v = momentum * v + g (PyTorch's SGD, nesterov=True).
  void step(std::vector<float>& theta, const std::vector<float>& pseudo_grad) {
    step(theta, pseudo_grad.data(), 0, theta.size());
  }
  // The same over theta[begin, begin + count) only, with pseudo_grad[0, count) (one fragment).
  void step(std::vector<float>& theta, const float* pseudo_grad, size_t begin, size_t count);
  std::vector<float>& velocity() { return velocity_; }  // outer state a late joiner would receive

 private:
  std::vector<float> velocity_;
  float lr_;
  float momentum_;
};

// FNV-1a over the raw bytes: equal hashes on every worker mean byte-identical weights.
uint64_t fnv1a(const void* data, size_t bytes);

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_OUTER_OPTIMIZER_HPP_
