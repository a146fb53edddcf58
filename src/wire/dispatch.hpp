// Table dispatch of decoded messages: register a handler per message type, then feed frames.
// Unknown or unregistered types, and payloads that do not decode, return a protocol error
// (the caller closes the connection with that reason).
#ifndef PCCL_WIRE_DISPATCH_HPP_
#define PCCL_WIRE_DISPATCH_HPP_

#include <array>
#include <functional>
#include <string>
#include <utility>

#include "wire/messages.hpp"

namespace pccl::wire {

class Dispatcher {
 public:
  using Raw = std::function<Status(const FrameHeader&, const uint8_t*, size_t)>;

  // fn: Status(const FrameHeader&, const Msg&)
  template <typename Msg, typename Fn>
  void on(Fn fn) {
    table_[static_cast<size_t>(Msg::kType)] = [fn = std::move(fn)](const FrameHeader& h, const uint8_t* p,
                                                                   size_t n) -> Status {
      auto msg = decodePayload<Msg>(p, n);
      if (!msg.isOk()) return msg.status();
      return fn(h, *msg);
    };
  }

  Status dispatch(const FrameHeader& h, const uint8_t* payload, size_t size) const {
    if (h.type >= table_.size() || !table_[h.type]) {
      return Status::protocol(std::string("unexpected message type ") + std::to_string(h.type) + " (" +
                              msgTypeName(h.type) + ") on this connection");
    }
    return table_[h.type](h, payload, size);
  }

 private:
  std::array<Raw, kMaxMsgType> table_{};
};

}  // namespace pccl::wire

#endif  // PCCL_WIRE_DISPATCH_HPP_
