#include "torch_model.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace diloco {

BlockImpl::BlockImpl(int64_t d_model, int64_t heads) : heads_(heads) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
  qkv_ = register_module("qkv", torch::nn::Linear(d_model, 3 * d_model));
  proj_ = register_module("proj", torch::nn::Linear(d_model, d_model));
  fc1_ = register_module("fc1", torch::nn::Linear(d_model, 4 * d_model));
  fc2_ = register_module("fc2", torch::nn::Linear(4 * d_model, d_model));
}

torch::Tensor BlockImpl::attention(const torch::Tensor& x, const torch::Tensor& causal_mask) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), dh = d / heads_;
  auto qkv = qkv_->forward(x).view({b, t, 3, heads_, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
  auto scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(dh));
  auto weights = torch::softmax(scores + causal_mask.slice(0, 0, t).slice(1, 0, t), -1);
  auto out = torch::matmul(weights, qkv[2]).transpose(1, 2).reshape({b, t, d});
  return proj_->forward(out);
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& causal_mask) {
  auto h = x + attention(ln1_->forward(x), causal_mask);
  return h + fc2_->forward(torch::gelu(fc1_->forward(ln2_->forward(h))));
}

ByteLmImpl::ByteLmImpl(const ModelConfig& config) {
  const int64_t d = config.d_model, t = config.seq_len;
  token_embedding_ = register_module("token_embedding", torch::nn::Embedding(256, d));
  position_embedding_ = register_parameter("position_embedding", torch::randn({t, d}) * 0.02);
  for (uint32_t i = 0; i < config.layers; ++i) {
    blocks_.push_back(register_module("block" + std::to_string(i), Block(d, config.heads)));
  }
  ln_final_ = register_module("ln_final", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  head_ = register_module("head", torch::nn::Linear(d, 256));
  causal_mask_ = torch::full({t, t}, -std::numeric_limits<float>::infinity()).triu(1);
}

torch::Tensor ByteLmImpl::forward(const torch::Tensor& tokens) {
  const int64_t t = tokens.size(1);
  auto x = token_embedding_->forward(tokens) + position_embedding_.slice(0, 0, t);
  for (auto& block : blocks_) x = block->forward(x, causal_mask_);
  return head_->forward(ln_final_->forward(x));
}

size_t parameterCount(torch::nn::Module& model) {
  size_t n = 0;
  for (const auto& p : model.parameters()) n += static_cast<size_t>(p.numel());
  return n;
}

void copyParametersTo(torch::nn::Module& model, std::vector<float>& flat) {
  flat.resize(parameterCount(model));
  size_t offset = 0;
  for (const auto& p : model.parameters()) {
    auto c = p.detach().contiguous();
    std::memcpy(flat.data() + offset, c.data_ptr<float>(), static_cast<size_t>(c.numel()) * sizeof(float));
    offset += static_cast<size_t>(c.numel());
  }
}

void copyParametersFrom(torch::nn::Module& model, const std::vector<float>& flat) {
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (auto& p : model.parameters()) {
    auto src = torch::from_blob(const_cast<float*>(flat.data() + offset), p.sizes(), torch::kFloat32);
    p.copy_(src);
    offset += static_cast<size_t>(p.numel());
  }
}

}  // namespace diloco
