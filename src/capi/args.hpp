// Checking and converting the C API's argument structs and enums to the C++ API's types.
#ifndef PCCL_CAPI_ARGS_HPP_
#define PCCL_CAPI_ARGS_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "pccl/communicator.hpp"
#include "pccl/pccl.h"

namespace pccl::capi {

// A C caller may pass any int as an enum. Reading such a value through the C++ enum type is undefined
// (UBSan: "load of value N, which is not a valid value"), so enums from C are read as their bytes.
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}
template <typename E>
bool validEnum(const E& e, int count) {
  const int v = rawEnum(e);
  return v >= 0 && v < count;
}

// What an all-reduce call asks for, checked and converted.
struct ReduceArgs {
  pccl::DataType dtype = pccl::DataType::kFloat32;
  pccl::RedOp op = pccl::RedOp::kSum;
  pccl::ReduceOptions options;
};

// Checks dtype, op and *opts (NULL = defaults); fails with pcclInvalidArgument and a detail. The enums
// are taken by reference: copying an out-of-range one would already be a load rawEnum() avoids.
pcclResult_t reduceArgsFrom(const pcclDataType_t& dtype, const pcclRedOp_t& op, const pcclReduceOptions_t* opts,
                            ReduceArgs* out);

// Copies an all-reduce's result into *out (NULL: nothing).
void reduceInfoTo(const pccl::ReduceInfo& in, pcclReduceInfo_t* out);

// pcclInvalidArgument unless a config struct was made by its _INIT macro of this pccl version.
pcclResult_t checkConfigHeader(uint32_t struct_size, size_t expected, uint32_t version, const char* what);

// Copies a config's secret bytes straight into *out (nothing when NULL): no temporary that would be
// freed unwiped. The library wipes the copy once it has derived its key (docs/security.md).
void copySecret(const void* secret, size_t len, std::string* out);

}  // namespace pccl::capi

#endif  // PCCL_CAPI_ARGS_HPP_
