// libFuzzer harness: the quantized-payload decoder and zstd, as a peer runs them on a segment another
// peer sent. Input: byte 0 picks the wire format and element type, bytes 1..2 the element count
// (0..65535), the rest is the segment's wire bytes. A segment of the wrong length is refused before
// anything reads it (as the ring does); one of the right length goes through validateWire, and when
// that accepts it, through decode and decodeReduce for every operator the format allows. The same
// bytes are also offered to zstd as a frame that must decompress to exactly the segment's length.
// Invariants: no out-of-bounds access, no undefined behaviour, a refusal is a ProtocolError with a
// message, and decoding what validateWire accepted never fails.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "codec/compress.hpp"
#include "codec/dtype.hpp"
#include "codec/quant.hpp"

using namespace pccl;
using namespace pccl::codec;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

constexpr DType kFloats[] = {DType::kFloat16, DType::kBfloat16, DType::kFloat32, DType::kFloat64};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kAvg, RedOp::kProd, RedOp::kMin, RedOp::kMax};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  if ((data[0] & 7) >= kQuantCount) return 0;
  const auto q = static_cast<Quant>(data[0] & 7);  // bits 0..2: none, fp16, bf16, int8, fp4
  const DType t = kFloats[(data[0] >> 3) & 3];
  const size_t count = data[1] | (static_cast<size_t>(data[2]) << 8);
  const std::vector<uint8_t> wire(data + 3, data + size);  // exactly sized for ASan
  if (!checkQuant(q, t, RedOp::kSum).isOk()) return 0;
  const size_t need = wireBytes(q, t, count);

  static Compressor zstd;
  std::vector<uint8_t> unpacked(need);
  Status z = zstd.decompress(wire.data(), wire.size(), unpacked.data(), need);
  if (!z.isOk()) require(z.code() == Code::kProtocolError && !z.message().empty());

  if (wire.size() != need) return 0;  // the ring refuses a segment of the wrong length first
  Status v = validateWire(q, t, wire.data(), count);
  if (!v.isOk()) {
    require(v.code() == Code::kProtocolError && !v.message().empty());
    return 0;
  }
  const size_t elem = dtypeSize(t);
  std::vector<uint8_t> out(count * elem), in(count * elem, 0x3c), acc(count * elem);
  decode(q, t, wire.data(), count, out.data());
  for (RedOp op : kOps) {
    if (!checkQuant(q, t, op).isOk()) continue;
    decodeReduce(q, t, op, wire.data(), count, in.data(), acc.data(), op == RedOp::kAvg ? 3 : 1);
  }
  return 0;
}
