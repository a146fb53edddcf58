// How mismatch messages name an all-reduce call, on the peers and on the master alike:
// "count=100 dtype=float32 op=sum quant=none compress=0 epoch=2 segment_bytes=1048576 algo=ring".
#ifndef PCCL_CODEC_DESCRIBE_HPP_
#define PCCL_CODEC_DESCRIBE_HPP_

#include <cstdint>
#include <string>

#include "wire/data.hpp"

namespace pccl::codec {

std::string describeCall(const wire::OpDesc& d, uint64_t epoch);

}  // namespace pccl::codec

#endif  // PCCL_CODEC_DESCRIBE_HPP_
