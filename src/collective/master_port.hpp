// What the collectives tell the master and ask of it (docs/protocol.md §5.3), as an interface that
// collective/ owns and api/ implements over the peer's control connection (api/link_master_port.hpp).
// The algorithms never see the connection, as Gloo keeps its algorithms apart from its rendezvous,
// and tests drive the commit and in-doubt paths with a fake master (tests/test_op_master.cpp). The
// master's answers come back through Collectives::onAbort, onQuery, onOutcome, masterBack and
// linkLost (op_reports.cpp).
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_MASTER_PORT_HPP_
#define PCCL_COLLECTIVE_MASTER_PORT_HPP_

#include <cstdint>

#include "wire/messages.hpp"

namespace pccl::collective {

class MasterPort {
 public:
  virtual ~MasterPort() = default;

  // Reports may go out now: the master took this peer in (or back), and its connection is open.
  // While it is false nothing is sent; Collectives::masterBack sends again what the master must know.
  virtual bool ready() const = 0;
  // The master closed the connection (or it broke) and this peer has not read that yet: a ring that
  // broke at the same time broke because the master is gone.
  virtual bool remoteClosed() const = 0;

  // Each message goes out in a frame of the ring's `epoch`.
  virtual void announce(const wire::OpAnnounce& m, uint64_t epoch) = 0;   // a call that runs (kAnnounceAfter)
  virtual void reportDone(const wire::OpDone& m, uint64_t epoch) = 0;     // an announced call committed
  virtual void reportFailed(const wire::OpFailed& m, uint64_t epoch) = 0; // a call failed before the commit
  // This peer's phase of a call: prepared when it asks how a call in doubt ended, or its answer to OpQuery.
  virtual void reportState(const wire::OpState& m, uint64_t epoch) = 0;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_MASTER_PORT_HPP_
