// The environment's say on resumable ring connections (docs/environment.md):
//   PCCL_RING_RESUME    1 (default): a ring connection that breaks while both ends live is replaced by a
//                       new one and the operation goes on; 0: it fails the operations on the ring, as a
//                       lost peer does. Both ends must have it on for a connection to resume.
//   PCCL_RING_STALL_MS  a connection with data in flight and no TCP acknowledgement for this long counts
//                       as broken, and is replaced (a middlebox that dropped its state keeps the path
//                       working for new connections only): 1000..600000 ms, default 10000; 0: never.
// Read once; a bad value is logged and the default kept.
#ifndef PCCL_NET_RESUME_CONFIG_HPP_
#define PCCL_NET_RESUME_CONFIG_HPP_

#include <cstdint>

namespace pccl::net {

bool ringResumeEnabled();
uint32_t ringStallMs();

}  // namespace pccl::net

#endif  // PCCL_NET_RESUME_CONFIG_HPP_
