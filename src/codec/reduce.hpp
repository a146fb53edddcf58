// The reduction kernels of the ring: acc[i] = acc[i] (op) in[i] for every dtype and operator.
//   - Integers wrap on overflow (two's complement) for sum and prod; avg with a divisor divides the
//     (wrapped) sum, truncating toward zero. The ring's integer avg does not use that: it carries exact
//     partial sums in a wider type (codec/partial_sum.hpp).
//   - float16/bfloat16 are widened to float32, combined, and rounded once (to nearest even) per call,
//     i.e. once per ring hop.
//   - avg behaves as sum on every hop but the last; the last hop passes divisor = world size.
//   - min/max of a NaN and a number return either operand (IEEE leaves it open); which one is fixed,
//     and only one peer computes each element, so all peers still hold the same bytes.
#ifndef PCCL_CODEC_REDUCE_HPP_
#define PCCL_CODEC_REDUCE_HPP_

#include <cstddef>
#include <cstdint>

#include "codec/dtype.hpp"

namespace pccl::codec {

// `acc` and `in` hold `count` elements of `dtype` and must not overlap. divisor >= 1.
void reduceInto(DType dtype, RedOp op, void* acc, const void* in, size_t count, uint32_t divisor);

// acc[i] /= divisor (avg with a single participant; divisor 1 is a no-op).
void divideInPlace(DType dtype, void* acc, size_t count, uint32_t divisor);

}  // namespace pccl::codec

#endif  // PCCL_CODEC_REDUCE_HPP_
