// Element access and reduction operators shared by the CPU loops (codec/) and the GPU kernels:
// how a stored element widens to the type arithmetic is done in, how it narrows back, and what
// each operator computes.
//   - Integers wrap on overflow (two's complement) for sum and prod.
//   - float16/bfloat16 are widened to float32 and rounded once (to nearest even) when stored.
//   - min/max of a NaN and a number return a fixed operand (IEEE leaves it open); only one peer
//     computes each element, so all peers still hold the same bytes.
#ifndef PCCL_KERNELS_ELEM_HPP_
#define PCCL_KERNELS_ELEM_HPP_

#include <cstdint>
#include <type_traits>

#include "kernels/half.hpp"
#include "kernels/portable.hpp"

namespace pccl::kernels {

template <typename T>
struct Plain {
  using Stored = T;
  using Wide = T;
  static PCCL_HD Wide load(Stored v) { return static_cast<Wide>(v); }
  static PCCL_HD Stored store(Wide v) { return static_cast<Stored>(v); }
};
struct Half {
  using Stored = uint16_t;
  using Wide = float;
  static PCCL_HD Wide load(Stored v) { return halfToFloat(v); }
  static PCCL_HD Stored store(Wide v) { return floatToHalf(v); }
};
struct Bf16 {
  using Stored = uint16_t;
  using Wide = float;
  static PCCL_HD Wide load(Stored v) { return bf16ToFloat(v); }
  static PCCL_HD Stored store(Wide v) { return floatToBf16(v); }
};

// Integer arithmetic is done unsigned and at least 32 bits wide, so overflow wraps instead of being
// undefined (and small types are not promoted to a signed int that could overflow in a product).
template <typename W>
using Unsigned = std::conditional_t<(sizeof(W) < 4), uint32_t, std::make_unsigned_t<W>>;

struct Sum {
  template <typename W> static PCCL_HD W apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return static_cast<W>(static_cast<Unsigned<W>>(static_cast<Unsigned<W>>(a) + static_cast<Unsigned<W>>(b)));
    } else {
      return pcclAdd(a, b);
    }
  }
};
struct Prod {
  template <typename W> static PCCL_HD W apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return static_cast<W>(static_cast<Unsigned<W>>(static_cast<Unsigned<W>>(a) * static_cast<Unsigned<W>>(b)));
    } else {
      return pcclMul(a, b);
    }
  }
};
struct Min {
  template <typename W> static PCCL_HD W apply(W a, W b) { return b < a ? b : a; }
};
struct Max {
  template <typename W> static PCCL_HD W apply(W a, W b) { return a < b ? b : a; }
};

}  // namespace pccl::kernels

#endif  // PCCL_KERNELS_ELEM_HPP_
