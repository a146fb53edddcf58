#include "codec/describe.hpp"

#include <fmt/format.h>

#include "codec/dtype.hpp"

namespace pccl::codec {

std::string describeCall(const wire::OpDesc& d, uint64_t epoch) {
  const char* algo = d.algo == static_cast<uint8_t>(wire::Algo::kRing)     ? "ring"
                     : d.algo == static_cast<uint8_t>(wire::Algo::kGather) ? "gather"
                     : d.algo == static_cast<uint8_t>(wire::Algo::kTwoLevel) ? "two-level"
                     : d.algo == static_cast<uint8_t>(wire::Algo::kTwoLevelGather) ? "two-level-gather"
                                                                                   : "unknown";
  const auto kind = static_cast<wire::Collective>(d.kind);
  const std::string root = kind == wire::Collective::kBroadcast ? fmt::format(" root={}", d.root) : std::string();
  return fmt::format("{} count={} dtype={} op={} quant={} compress={} epoch={} segment_bytes={} algo={}{}",
                     wire::collectiveName(kind), d.count, dtypeName(static_cast<DType>(d.dtype)),
                     redOpName(static_cast<RedOp>(d.op)), quantName(static_cast<Quant>(d.quant)), d.compress, epoch,
                     d.segment_bytes, algo, root);
}

}  // namespace pccl::codec
