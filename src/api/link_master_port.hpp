// collective::MasterPort over the peer's control connection (peer::MasterLink): what the collectives
// tell the master goes out on the link, and the master's messages about calls (OpAbort, OpQuery,
// OpOutcome) come from the link's dispatcher to the collectives.
// Thread: the communicator's io thread.
#ifndef PCCL_API_LINK_MASTER_PORT_HPP_
#define PCCL_API_LINK_MASTER_PORT_HPP_

#include <cstdint>

#include "collective/collectives.hpp"
#include "collective/master_port.hpp"
#include "peer/master_link.hpp"

namespace pccl {

class LinkMasterPort final : public collective::MasterPort {
 public:
  // Registers the master's messages about calls on `link`'s dispatcher, for `colls`.
  LinkMasterPort(peer::MasterLink& link, collective::Collectives& colls) : link_(link) {
    wire::Dispatcher& d = link.dispatcher();
    d.on<wire::OpAbort>([&colls](const wire::FrameHeader& h, const wire::OpAbort& m) {
      colls.onAbort(m, h.epoch);
      return Status::ok();
    });
    d.on<wire::OpQuery>([&colls](const wire::FrameHeader&, const wire::OpQuery& m) {
      colls.onQuery(m);
      return Status::ok();
    });
    d.on<wire::OpOutcome>([&colls](const wire::FrameHeader&, const wire::OpOutcome& m) {
      colls.onOutcome(m);
      return Status::ok();
    });
  }

  bool ready() const override { return link_.isReady(); }
  bool remoteClosed() const override { return link_.remoteClosed(); }
  void announce(const wire::OpAnnounce& m, uint64_t epoch) override { link_.send(m, epoch); }
  void reportDone(const wire::OpDone& m, uint64_t epoch) override { link_.send(m, epoch); }
  void reportFailed(const wire::OpFailed& m, uint64_t epoch) override { link_.send(m, epoch); }
  void reportState(const wire::OpState& m, uint64_t epoch) override { link_.send(m, epoch); }

 private:
  peer::MasterLink& link_;
};

}  // namespace pccl

#endif  // PCCL_API_LINK_MASTER_PORT_HPP_
