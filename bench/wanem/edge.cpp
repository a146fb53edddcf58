#include "edge.hpp"

#include "packet.hpp"

namespace pccl::wanem {

const char* edgeName(EdgeKind k) {
  switch (k) {
    case EdgeKind::kOpen: return "open";
    case EdgeKind::kFirewall: return "firewall";
    case EdgeKind::kCone: return "cone";
    case EdgeKind::kSymmetric: return "symmetric";
  }
  return "?";
}

bool parseEdgeKind(const std::string& s, EdgeKind* out) {
  if (s == "cone") return *out = EdgeKind::kCone, true;
  if (s == "symmetric") return *out = EdgeKind::kSymmetric, true;
  return false;
}

Edge::Edge(EdgeKind kind, uint32_t private_addr, uint32_t public_addr, uint16_t first_port)
    : kind_(kind), private_(private_addr), public_(public_addr), next_port_(first_port) {}

bool Edge::outbound(uint8_t* p, size_t n) {
  if (kind_ == EdgeKind::kOpen) return true;
  TcpFields t;
  const PacketInfo info = parsePacket(p, n);
  std::lock_guard<std::mutex> lk(mu_);
  if (!parseTcp(p, n, &t)) {
    if (kind_ == EdgeKind::kFirewall) return true;  // a firewall lets anything out
    counts_.in_refused += 1;
    return false;
  }
  const auto flow = std::make_tuple(t.sport, info.dst, t.dport);
  sent_.insert(flow);
  if (kind_ == EdgeKind::kFirewall) return true;
  uint16_t pub = 0;
  auto allocate = [&](uint16_t* slot) {
    if (*slot == 0) {
      *slot = next_port_++;
      back_[*slot] = t.sport;
      counts_.mappings += 1;
    }
    pub = *slot;
  };
  if (kind_ == EdgeKind::kCone) {
    allocate(&cone_[t.sport]);
  } else {
    allocate(&symmetric_[flow]);
  }
  counts_.out_translated += 1;
  return rewriteTcpEndpoint(p, n, true, public_, pub);
}

bool Edge::inbound(uint8_t* p, size_t n) {
  if (kind_ == EdgeKind::kOpen) return true;
  TcpFields t;
  const PacketInfo info = parsePacket(p, n);
  std::lock_guard<std::mutex> lk(mu_);
  if (!parseTcp(p, n, &t)) {
    counts_.in_refused += 1;
    return false;
  }
  uint16_t local = t.dport;
  if (kind_ != EdgeKind::kFirewall) {
    auto it = back_.find(t.dport);
    if (it == back_.end() || info.dst != public_) {
      counts_.in_refused += 1;
      return false;
    }
    local = it->second;
    // A symmetric NAT's public port belongs to one destination: only that one may answer on it.
    if (kind_ == EdgeKind::kSymmetric) {
      auto m = symmetric_.find(std::make_tuple(local, info.src, t.sport));
      if (m == symmetric_.end() || m->second != t.dport) {
        counts_.in_refused += 1;
        return false;
      }
    }
  }
  if (sent_.count(std::make_tuple(local, info.src, t.sport)) == 0) {
    counts_.in_refused += 1;
    return false;
  }
  counts_.in_translated += 1;
  return kind_ == EdgeKind::kFirewall || rewriteTcpEndpoint(p, n, false, private_, local);
}

EdgeCounts Edge::counts() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counts_;
}

}  // namespace pccl::wanem
