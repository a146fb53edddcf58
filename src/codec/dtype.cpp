#include "codec/dtype.hpp"

namespace pccl::codec {

size_t dtypeSize(DType t) {
  static constexpr size_t kSizes[kDTypeCount] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
  return kSizes[static_cast<uint8_t>(t) % kDTypeCount];
}

const char* dtypeName(DType t) {
  static constexpr const char* kNames[kDTypeCount] = {"int8",   "uint8",  "int16",   "uint16",
                                                      "int32",  "uint32", "int64",   "uint64",
                                                      "float16", "bfloat16", "float32", "float64"};
  return isValidDType(static_cast<uint8_t>(t)) ? kNames[static_cast<uint8_t>(t)] : "?";
}

const char* redOpName(RedOp op) {
  static constexpr const char* kNames[kRedOpCount] = {"sum", "avg", "prod", "min", "max"};
  return isValidRedOp(static_cast<uint8_t>(op)) ? kNames[static_cast<uint8_t>(op)] : "?";
}

const char* quantName(Quant q) {
  static constexpr const char* kNames[kQuantCount] = {"none", "fp16", "bf16", "int8", "fp4"};
  return isValidQuant(static_cast<uint8_t>(q)) ? kNames[static_cast<uint8_t>(q)] : "?";
}

bool isFloating(DType t) { return t >= DType::kFloat16; }

}  // namespace pccl::codec
