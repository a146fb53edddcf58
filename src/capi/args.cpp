#include "capi/args.hpp"

#include "capi/errors.hpp"

namespace pccl::capi {

pcclResult_t reduceArgsFrom(const pcclDataType_t& dtype, const pcclRedOp_t& op, const pcclReduceOptions_t* opts,
                            ReduceArgs* out) {
  if (!validEnum(dtype, 12)) return fail(pcclInvalidArgument, "unknown pcclDataType_t value");
  if (!validEnum(op, 5)) return fail(pcclInvalidArgument, "unknown pcclRedOp_t value");
  out->dtype = static_cast<pccl::DataType>(rawEnum(dtype));
  out->op = static_cast<pccl::RedOp>(rawEnum(op));
  if (opts == nullptr) return pcclSuccess;
  if (opts->struct_size != sizeof(pcclReduceOptions_t)) {
    return fail(pcclInvalidArgument, "pcclReduceOptions_t was not initialised with PCCL_REDUCE_OPTIONS_INIT");
  }
  if (!validEnum(opts->quant, 5)) return fail(pcclInvalidArgument, "unknown pcclQuant_t value");
  if (!validEnum(opts->location, 2)) {
    return fail(pcclInvalidArgument, "unknown pcclBufferLocation_t value");
  }
  out->options.tag = opts->tag;
  out->options.quant = static_cast<pccl::Quant>(rawEnum(opts->quant));
  out->options.compress = opts->compress;
  out->options.location = static_cast<pccl::BufferLocation>(rawEnum(opts->location));
  return pcclSuccess;
}

void reduceInfoTo(const pccl::ReduceInfo& in, pcclReduceInfo_t* out) {
  if (out == nullptr) return;
  out->tx_bytes = in.tx_bytes;
  out->rx_bytes = in.rx_bytes;
  out->world_size = in.world_size;
  out->time_s = in.seconds;
}

pcclResult_t checkConfigHeader(uint32_t struct_size, size_t expected, uint32_t version, const char* what) {
  if (struct_size != expected || version != PCCL_CONFIG_VERSION) {
    return fail(pcclInvalidArgument, std::string(what) +
                                         " was not initialised with its _INIT macro (or comes from another pccl "
                                         "version): struct_size " +
                                         std::to_string(struct_size) + ", config_version " + std::to_string(version));
  }
  return pcclSuccess;
}

void copySecret(const void* secret, size_t len, std::string* out) {
  if (secret != nullptr) out->assign(static_cast<const char*>(secret), len);
}

}  // namespace pccl::capi
