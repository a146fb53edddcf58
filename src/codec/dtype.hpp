// Element types and reduction operators, numbered exactly as pcclDataType_t and pcclRedOp_t.
#ifndef PCCL_CODEC_DTYPE_HPP_
#define PCCL_CODEC_DTYPE_HPP_

#include <cstddef>
#include <cstdint>

namespace pccl::codec {

enum class DType : uint8_t {
  kInt8 = 0, kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kUint64,
  kFloat16, kBfloat16, kFloat32, kFloat64,
};
inline constexpr uint8_t kDTypeCount = 12;

enum class RedOp : uint8_t { kSum = 0, kAvg, kProd, kMin, kMax };
inline constexpr uint8_t kRedOpCount = 5;

enum class Quant : uint8_t { kNone = 0, kFp16, kBf16, kInt8, kFp4 };
inline constexpr uint8_t kQuantCount = 5;

inline bool isValidDType(uint8_t v) { return v < kDTypeCount; }
inline bool isValidRedOp(uint8_t v) { return v < kRedOpCount; }
inline bool isValidQuant(uint8_t v) { return v < kQuantCount; }

size_t dtypeSize(DType t);
const char* dtypeName(DType t);
const char* redOpName(RedOp op);
const char* quantName(Quant q);
bool isFloating(DType t);

}  // namespace pccl::codec

#endif  // PCCL_CODEC_DTYPE_HPP_
