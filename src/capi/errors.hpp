// Result codes and failure details of the C API: the 1:1 mapping from pccl::Code, the calling
// thread's last failure, and the exception barrier every entry point runs behind.
//
// Details are kept per thread: fail() sets the calling thread's last failure (what
// pcclGetLastError(NULL) reports), and rememberFailureOn() files it under a communicator for this
// thread only (what pcclGetLastError(comm) reports), so threads failing on one communicator at once
// never overwrite each other's detail.
#ifndef PCCL_CAPI_ERRORS_HPP_
#define PCCL_CAPI_ERRORS_HPP_

#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "pccl/pccl.h"
#include "pccl/status.hpp"

namespace pccl::capi {

inline pcclResult_t toC(pccl::Code c) { return static_cast<pcclResult_t>(static_cast<int>(c)); }

// Sets the calling thread's last failure to `message`; returns `code`.
pcclResult_t fail(pcclResult_t code, std::string message);

// pcclSuccess, or fail() with the status's code and message.
pcclResult_t fromStatus(const pccl::Status& s);

// Files the calling thread's last failure under the communicator `comm` (a handle value), for this
// thread's pcclGetLastError(comm).
void rememberFailureOn(uintptr_t comm);

// What pcclGetLastError(comm) returns on the calling thread (valid until its next pccl call).
const char* lastErrorFor(uintptr_t comm);

// Runs `fn`, turning any escaped exception into an error code: nothing crosses the C boundary.
template <typename Fn>
pcclResult_t guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(pcclSystemError, "out of memory");
  } catch (const std::exception& e) {
    return fail(pcclInternalError, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return fail(pcclInternalError, "unexpected exception");
  }
}

}  // namespace pccl::capi

#define PCCL_CHECK_PTR(p) \
  if ((p) == nullptr) return ::pccl::capi::fail(pcclInvalidArgument, #p " must not be NULL")

#endif  // PCCL_CAPI_ERRORS_HPP_
