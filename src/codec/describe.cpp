#include "codec/describe.hpp"

#include <fmt/format.h>

#include "codec/dtype.hpp"

namespace pccl::codec {

std::string describeCall(const wire::OpDesc& d, uint64_t epoch) {
  return fmt::format("count={} dtype={} op={} quant={} compress={} epoch={} segment_bytes={}", d.count,
                     dtypeName(static_cast<DType>(d.dtype)), redOpName(static_cast<RedOp>(d.op)),
                     quantName(static_cast<Quant>(d.quant)), d.compress, epoch, d.segment_bytes);
}

}  // namespace pccl::codec
