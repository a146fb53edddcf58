// Same-host lending: when a ring neighbour runs on this machine, a data frame's elements need not go
// through the socket (two copies and the whole TCP stack on each side). The sender lends them instead:
// it sends where they lie in its memory, and the receiver copies them straight into their destination
// with process_vm_readv(2) (one copy, done by the receiver) when it reads the frame. Nothing comes
// back: the sender keeps the elements unchanged for as long as its operation runs, which is long
// enough (DataChannel::enableLending(), docs/algorithms.md §5). Everything else (headers, control
// frames, failures) still travels on the connection. docs/protocol.md §5.4.1 has the frames.
// A connection lends only after its receiver proved it can read the sender's memory: the offer names
// a process id and the address of 16 random bytes that the (authenticated) offer also carries, and the
// receiver reads them there. Another host, another pid namespace, a kernel or sandbox that forbids
// process_vm_readv (seccomp, Yama, a non-dumpable process): the bytes do not match or cannot be read,
// nothing is accepted, and the frames keep going through the socket.
#ifndef PCCL_NET_LENDING_HPP_
#define PCCL_NET_LENDING_HPP_

#include <array>
#include <cstdint>

#include "pccl/status.hpp"
#include "wire/data.hpp"

namespace pccl::net {

// Elements of fewer bytes go through the socket: for them the receiver's extra system call (the
// record, then the copy) costs more than the second copy saves.
inline constexpr uint32_t kLendMinBytes = 32 * 1024;

// Fills `token` with random bytes and returns the offer that names it (and this process). The token
// must stay where it is for as long as the connection lives.
wire::LendOffer makeLendOffer(std::array<uint8_t, 16>* token);

// Reads the offer's token in the offering process: ok only if the bytes are there and equal.
Status probeLender(const wire::LendOffer& offer);

// Copies `bytes` at `addr` in process `pid` to `dst`.
Status readLent(uint32_t pid, uint64_t addr, uint8_t* dst, uint32_t bytes);

}  // namespace pccl::net

#endif  // PCCL_NET_LENDING_HPP_
