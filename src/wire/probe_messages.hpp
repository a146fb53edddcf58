// Link measurement between a peer and the master (docs/protocol.md §5.7). For pcclOptimizeTopology (or a
// ring update in automatic mode) the master measures links in rounds: each round it sends every peer
// taking part a ProbePlan naming at most one peer to send to and at most one to receive from, and each
// answers with a ProbeReport once its round is over. LinkQuery / LinkReport let a peer read the links
// the master holds, a page at a time.
#ifndef PCCL_WIRE_PROBE_MESSAGES_HPP_
#define PCCL_WIRE_PROBE_MESSAGES_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "wire/control_messages.hpp"
#include "wire/message.hpp"

namespace pccl::wire {

struct ProbePlan {
  static constexpr MsgType kType = MsgType::kProbePlan;
  uint64_t probe_id = 0;     // names this round's probe connections (their P2PHello's epoch field)
  uint32_t budget_ms = 0;    // how long a sender sends once its connections are up
  uint64_t max_bytes = 0;    // ... or until it sent this many bytes (at least 1)
  // A link has the connections a ring link between the two would have (linkConnections).
  bool has_target = false;   // send to `target` on `target_connections` connections
  MemberInfo target;
  uint32_t target_connections = 0;
  bool has_source = false;   // receive from `source` on `source_connections` connections
  MemberInfo source;
  uint32_t source_connections = 0;
  // Who opens a link's connections (protocol 20, wire::opensLink): the sender, unless the receiver
  // cannot be dialled and the sender can; then the receiver dials the sender (kHelloReverse hellos).
  bool target_dials = false;  // has_target: the target opens them to us
  bool dial_source = false;   // has_source: we open them to the source
  void encode(ByteWriter& w) const;
  static Result<ProbePlan> decode(ByteReader& r);
};

struct ProbeReport {
  static constexpr MsgType kType = MsgType::kProbeReport;
  uint64_t probe_id = 0;
  // As a sender (target_id zero when the plan named none): the round trip of the probe hello, µs (0: the
  // connections did not come up), and the payload bytes written.
  Uuid target_id{};
  uint64_t rtt_us = 0;
  uint64_t tx_bytes = 0;
  // As a receiver (source_id zero when none): payload bytes received and the steady rate they came at,
  // bytes/s (0: nothing usable arrived).
  Uuid source_id{};
  uint64_t rx_bytes = 0;
  uint64_t rx_rate = 0;
  std::string detail;  // why a side failed, for the master's log; empty when both worked
  void encode(ByteWriter& w) const;
  static Result<ProbeReport> decode(ByteReader& r);
};

struct LinkQuery {
  static constexpr MsgType kType = MsgType::kLinkQuery;
  uint64_t request_id = 0;
  uint32_t first = 0;  // index of the first link wanted
  void encode(ByteWriter& w) const;
  static Result<LinkQuery> decode(ByteReader& r);
};

struct LinkEntry {
  Uuid from{};
  Uuid to{};
  uint64_t bandwidth = 0;  // bytes/s; 0: measured unusable
  uint64_t rtt_us = 0;
  bool operator==(const LinkEntry& o) const {
    return from == o.from && to == o.to && bandwidth == o.bandwidth && rtt_us == o.rtt_us;
  }
};

inline constexpr uint32_t kLinkReportPage = 16384;  // links per LinkReport at most (48 bytes each)

struct LinkReport {
  static constexpr MsgType kType = MsgType::kLinkReport;
  uint64_t request_id = 0;
  uint64_t epoch = 0;   // the master's epoch when it answered
  uint32_t total = 0;   // links the master holds; this page has links [first, first + links.size())
  uint32_t first = 0;
  std::vector<LinkEntry> links;
  void encode(ByteWriter& w) const;
  static Result<LinkReport> decode(ByteReader& r);
};

}  // namespace pccl::wire

#endif  // PCCL_WIRE_PROBE_MESSAGES_HPP_
