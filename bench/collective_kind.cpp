#include "collective_kind.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "bench.hpp"

namespace pccl::bench {

bool collectiveOf(const std::string& name, CollectiveKind* out) {
  if (name == "allreduce") *out = CollectiveKind::kAllReduce;
  else if (name == "broadcast") *out = CollectiveKind::kBroadcast;
  else if (name == "allgather") *out = CollectiveKind::kAllGather;
  else if (name == "reducescatter") *out = CollectiveKind::kReduceScatter;
  else return false;
  return true;
}

const char* collectiveName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kReduceScatter: return "reducescatter";
  }
  return "?";
}

Layout layoutOf(CollectiveKind k, size_t bytes, size_t elem, int world) {
  Layout l;
  const size_t n = bytes / elem;
  const size_t w = static_cast<size_t>(world);
  switch (k) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
      l.per_rank = l.send_count = l.recv_count = n;
      break;
    case CollectiveKind::kAllGather:
      l.per_rank = l.send_count = n / w;
      l.recv_count = l.per_rank * w;
      break;
    case CollectiveKind::kReduceScatter:
      l.per_rank = l.recv_count = n / w;
      l.send_count = l.per_rank * w;
      break;
  }
  l.bytes = (l.send_count > l.recv_count ? l.send_count : l.recv_count) * elem;
  return l;
}

double busFactor(CollectiveKind k, int world) {
  if (world <= 1) return 1.0;
  const double n = world;
  switch (k) {
    case CollectiveKind::kAllReduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::kBroadcast: return 1.0;
    default: return (n - 1) / n;
  }
}

void fillExpectedFor(CollectiveKind k, DataType t, void* buf, const Layout& l, int world, int rank) {
  auto* p = static_cast<uint8_t*>(buf);
  const size_t e = elemSize(t);
  switch (k) {
    case CollectiveKind::kAllReduce:
      return fillExpected(t, buf, l.recv_count, world);
    case CollectiveKind::kBroadcast:
      return fillInput(t, buf, l.recv_count, 0);
    case CollectiveKind::kAllGather:
      for (int r = 0; r < world; ++r) fillInput(t, p + static_cast<size_t>(r) * l.per_rank * e, l.per_rank, r);
      return;
    case CollectiveKind::kReduceScatter: {
      // Block `rank` of the sum of every rank's send_count inputs (element k of the whole depends on k % 7).
      std::vector<uint8_t> all(l.send_count * e);
      fillExpected(t, all.data(), l.send_count, world);
      std::memcpy(p, all.data() + static_cast<size_t>(rank) * l.per_rank * e, l.per_rank * e);
      return;
    }
  }
}

void fillRandomExpectedFor(CollectiveKind k, float* buf, const Layout& l, int world, int rank) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return fillRandomExpected(buf, l.recv_count, world, false);
    case CollectiveKind::kBroadcast:
      return fillRandom(buf, l.recv_count, 0);
    case CollectiveKind::kAllGather:
      for (int r = 0; r < world; ++r) fillRandom(buf + static_cast<size_t>(r) * l.per_rank, l.per_rank, r);
      return;
    case CollectiveKind::kReduceScatter: {
      std::vector<float> all(l.send_count);
      fillRandomExpected(all.data(), l.send_count, world, false);
      std::copy_n(all.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(rank) * l.per_rank), l.per_rank, buf);
      return;
    }
  }
}

Placement place(CollectiveKind k, const Layout& l, size_t elem, int rank, bool in_place, const uint8_t* send,
                uint8_t* recv) {
  Placement p;
  const size_t own = static_cast<size_t>(rank) * l.per_rank * elem;
  p.src = send;
  p.dst = recv;
  p.result = recv;
  if (!in_place) return p;
  switch (k) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
      std::memcpy(recv, send, l.send_count * elem);
      p.src = recv;
      break;
    case CollectiveKind::kAllGather:
      std::memcpy(recv + own, send, l.per_rank * elem);
      p.src = recv + own;
      break;
    case CollectiveKind::kReduceScatter:
      std::memcpy(recv, send, l.send_count * elem);
      p.src = recv;
      p.dst = recv + own;
      p.result = recv + own;
      break;
  }
  return p;
}

Placement onDevice(const Placement& host, const uint8_t* send, const uint8_t* recv, size_t bytes, void* dsend,
                   void* drecv) {
  const auto moved = [&](const void* p) -> uint8_t* {
    const auto* b = static_cast<const uint8_t*>(p);
    if (b >= recv && b < recv + bytes) return static_cast<uint8_t*>(drecv) + (b - recv);
    return static_cast<uint8_t*>(dsend) + (b - send);
  };
  Placement d = host;
  d.src = moved(host.src);
  d.dst = moved(host.dst);
  return d;  // the result is read on the host, after the download
}

Result<ReduceHandle> startPccl(Communicator& comm, CollectiveKind k, const Placement& p, const Layout& l, DataType t,
                               const ReduceOptions& o) {
  switch (k) {
    case CollectiveKind::kAllReduce: return comm.allReduceAsync(p.src, p.dst, l.per_rank, t, RedOp::kSum, o);
    case CollectiveKind::kBroadcast: return comm.broadcastAsync(p.src, p.dst, l.per_rank, t, 0, o);
    case CollectiveKind::kAllGather: return comm.allGatherAsync(p.src, p.dst, l.per_rank, t, o);
    case CollectiveKind::kReduceScatter: return comm.reduceScatterAsync(p.src, p.dst, l.per_rank, t, RedOp::kSum, o);
  }
  return Status::invalidArgument("unknown collective");
}

}  // namespace pccl::bench
