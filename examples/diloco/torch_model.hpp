// ByteLm: a small byte-level (vocabulary 256) pre-norm transformer language model, and helpers that
// move its parameters to and from one flat float32 vector (the buffer DiLoCo all-reduces).
#ifndef PCCL_EXAMPLES_DILOCO_TORCH_MODEL_HPP_
#define PCCL_EXAMPLES_DILOCO_TORCH_MODEL_HPP_

#include <torch/torch.h>

#include <vector>

#include "train_config.hpp"

namespace diloco {

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t d_model, int64_t heads);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal_mask);

 private:
  torch::Tensor attention(const torch::Tensor& x, const torch::Tensor& causal_mask);
  int64_t heads_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Block);

class ByteLmImpl : public torch::nn::Module {
 public:
  explicit ByteLmImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& tokens);  // [B, T] int64 → logits [B, T, 256]

 private:
  torch::nn::Embedding token_embedding_{nullptr};
  torch::Tensor position_embedding_;
  std::vector<Block> blocks_;
  torch::nn::LayerNorm ln_final_{nullptr};
  torch::nn::Linear head_{nullptr};
  torch::Tensor causal_mask_;
};
TORCH_MODULE(ByteLm);

size_t parameterCount(torch::nn::Module& model);
void copyParametersTo(torch::nn::Module& model, std::vector<float>& flat);
void copyParametersFrom(torch::nn::Module& model, const std::vector<float>& flat);

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_TORCH_MODEL_HPP_
