// Wire formats of the quantized all-reduce (design.md §4) on the CPU:
//   none   the elements as they are
//   fp16   IEEE binary16 per element (float32/float64 data; float64 is rounded to float32 first)
//   bf16   bfloat16 per element (float32/float64 data)
//   int8   min-max per block of kernels::kInt8Block elements (float16/bfloat16/float32/float64 data):
//          all block headers (lo, scale) first, then one code byte per element. The element math,
//          including NaN/Inf handling, is in kernels/quant_math.hpp.
// A segment is encoded on its own: blocks start at the segment's first element.
// Accumulation is always in the data's own type (float for float16/bfloat16); only what crosses the
// wire is quantized. The loops here are compiled with -O3 -ffp-contract=off.
#ifndef PCCL_CODEC_QUANT_HPP_
#define PCCL_CODEC_QUANT_HPP_

#include <cstddef>
#include <cstdint>

#include "codec/dtype.hpp"
#include "pccl/status.hpp"

namespace pccl::codec {

// Is `q` usable for `dtype` and `op`? InvalidArgument with the reason if not.
Status checkQuant(Quant q, DType dtype, RedOp op);

// Bytes of `count` elements in wire format `q` (q must suit dtype).
size_t wireBytes(Quant q, DType dtype, size_t count);

// wire := encode(src[0..count)).
void encode(Quant q, DType dtype, const void* src, size_t count, uint8_t* wire);

// Checks what a peer sent before it is decoded (int8 block headers must be NaN/NaN or finite/finite).
// ProtocolError naming the block otherwise.
Status validateWire(Quant q, DType dtype, const uint8_t* wire, size_t count);

// dst := decode(wire).
void decode(Quant q, DType dtype, const uint8_t* wire, size_t count, void* dst);

// dst[i] := decode(wire)[i] (op) in[i], then divided by `divisor` (>= 1; avg's last hop).
// dst must not overlap wire or in.
void decodeReduce(Quant q, DType dtype, RedOp op, const uint8_t* wire, size_t count, const void* in, void* dst,
                  uint32_t divisor);

}  // namespace pccl::codec

#endif  // PCCL_CODEC_QUANT_HPP_
