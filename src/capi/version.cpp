// pcclGetVersion: which libpccl is loaded.
#include "capi/errors.hpp"

extern "C" {

pcclResult_t pcclGetVersion(int* version) {
  PCCL_CHECK_PTR(version);
  *version = PCCL_VERSION_CODE;
  return pcclSuccess;
}

}  // extern "C"
