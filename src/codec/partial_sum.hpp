// Integer avg on the ring (docs/algorithms.md §4, protocol.md §5.4): the reduce-scatter carries exact
// partial sums in a wider integer, and the owner of each chunk divides once, rounding toward zero, so
// avg(100, 100) over two int8 peers is 100. The all-gather carries element values as usual.
// A sum is twice the element's width while N peers cannot overflow it (int8/uint8: N <= 256,
// int16/uint16: N <= 65536; 32- and 64-bit elements: any N), wider beyond: partialSumSize().
// Two's complement for signed types, little-endian; the element math is kernels/partial_sum.hpp
// (the GPU kernels use it too).
#ifndef PCCL_CODEC_PARTIAL_SUM_HPP_
#define PCCL_CODEC_PARTIAL_SUM_HPP_

#include <cstddef>
#include <cstdint>

#include "codec/dtype.hpp"

namespace pccl::codec {

// Does the reduce-scatter of (dtype, op) carry partial sums? (integer dtypes with avg)
inline bool hasPartialSums(DType dtype, RedOp op) { return op == RedOp::kAvg && !isFloating(dtype); }

// Bytes of one partial sum of integer `dtype` over `peers` peers: 2, 4, 8 or 16.
size_t partialSumSize(DType dtype, uint32_t peers);

// wire := `count` elements of `in` as partial sums (phase 0: our own contribution).
void widenToPartials(DType dtype, uint32_t peers, const void* in, size_t count, uint8_t* wire);

// dst := wire + in, as partial sums (a reduce hop). dst may be wire.
void addToPartials(DType dtype, uint32_t peers, const uint8_t* wire, const void* in, size_t count, uint8_t* dst);

// out := (wire + in) / peers, rounded toward zero, in `dtype` (the owner's last hop). peers >= 1.
void finishPartials(DType dtype, uint32_t peers, const uint8_t* wire, const void* in, size_t count, void* out);

}  // namespace pccl::codec

#endif  // PCCL_CODEC_PARTIAL_SUM_HPP_
