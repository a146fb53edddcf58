// What stands between a rank and the emulated internet (paths-file lines `firewall RANK` and
// `nat RANK cone|symmetric`, docs/wanem.md "Firewalls and NATs"): nothing, a stateful firewall that lets
// no connection in, or a NAT that gives the rank's TCP connections a public address and port and drops
// what nobody inside asked for. Pure and thread-safe: the router calls outbound() as a packet leaves the
// rank and inbound() as one arrives at it, from any lane.
#ifndef PCCL_WANEM_EDGE_HPP_
#define PCCL_WANEM_EDGE_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

namespace pccl::wanem {

enum class EdgeKind {
  kOpen,       // no filter, no translation
  kFirewall,   // a stateful firewall: a packet in is let through only from an endpoint the rank sent to
               // from that port (an inbound SYN to a listening port never is), no translation
  kCone,       // a NAT with one public port per local port, whatever the destination (endpoint-
               // independent mapping), that lets in only what comes from an endpoint the local port sent
               // to (address- and port-dependent filtering): the common "port-restricted cone" kind
  kSymmetric,  // a NAT with a new public port per local port and destination, the same filtering
};
const char* edgeName(EdgeKind k);
// The public address of the NAT in front of the rank at `private_addr` (10.201.R.2, netns.cpp): 10.202.R.2.
inline uint32_t natPublicAddr(uint32_t private_addr) { return (private_addr & 0xff00ffffu) | (202u << 16); }
bool parseEdgeKind(const std::string& s, EdgeKind* out);  // "cone" or "symmetric"

struct EdgeCounts {
  uint64_t out_translated = 0;  // packets leaving with the public address
  uint64_t in_translated = 0;   // packets let in (NAT: translated back; firewall: passed)
  uint64_t in_refused = 0;      // packets dropped at the edge: unsolicited, or not TCP
  uint64_t mappings = 0;        // public ports handed out
};

class Edge {
 public:
  // `private_addr`: the rank's own address; `public_addr`: the NAT's (unused for kOpen and kFirewall).
  // Public ports are handed out from `first_port` on, one after the other; a mapping never expires.
  Edge(EdgeKind kind, uint32_t private_addr, uint32_t public_addr, uint16_t first_port = 40000);
  EdgeKind kind() const { return kind_; }
  uint32_t publicAddr() const { return kind_ == EdgeKind::kCone || kind_ == EdgeKind::kSymmetric ? public_ : private_; }
  // A packet from the rank (virtio_net_hdr + IPv4, as the TUN gives it): records its flow, and for a NAT
  // rewrites its source to the public address and port. False: drop it (a NAT passes TCP only).
  bool outbound(uint8_t* p, size_t n);
  // A packet for the rank: true and (NAT) its destination rewritten to the rank's address and port when
  // it comes from an endpoint the rank's port sent to; false: drop it.
  bool inbound(uint8_t* p, size_t n);
  EdgeCounts counts() const;

 private:
  using Remote = std::pair<uint32_t, uint16_t>;  // address, port
  EdgeKind kind_;
  uint32_t private_, public_;
  uint16_t next_port_;
  mutable std::mutex mu_;
  std::set<std::tuple<uint16_t, uint32_t, uint16_t>> sent_;  // (local port, remote): what may come back
  std::map<uint16_t, uint16_t> cone_;                        // local port -> public port
  std::map<std::tuple<uint16_t, uint32_t, uint16_t>, uint16_t> symmetric_;  // (local port, remote) -> public
  std::map<uint16_t, uint16_t> back_;                        // public port -> local port
  EdgeCounts counts_;
};

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_EDGE_HPP_
