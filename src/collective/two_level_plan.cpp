#include "collective/two_level_plan.hpp"

#include <algorithm>
#include <numeric>

namespace pccl::collective {

namespace {
// Numerators and denominators are at most a region's size (< 2^32): the products fit.
bool less(const Fraction& a, const Fraction& b) { return a.num * b.den < b.num * a.den; }
bool equal(const Fraction& a, const Fraction& b) { return !less(a, b) && !less(b, a); }
// The region block holding the piece that starts at `at`: j with j/m <= at < (j+1)/m.
uint32_t blockAt(const Fraction& at, size_t members) {
  return static_cast<uint32_t>(at.num * members / at.den);
}
}  // namespace

TwoLevelRing twoLevelRing(const RegionLayout& layout) {
  TwoLevelRing out;
  out.layout = layout;
  for (const auto& members : layout.members) {
    const uint64_t m = members.size();
    for (uint64_t j = 0; j <= m; ++j) {
      const uint64_t g = std::gcd(j, m);
      out.bounds.push_back(Fraction{j / g, m / g});
    }
  }
  if (out.bounds.empty()) out.bounds = {Fraction{0, 1}, Fraction{1, 1}};
  std::sort(out.bounds.begin(), out.bounds.end(), less);
  out.bounds.erase(std::unique(out.bounds.begin(), out.bounds.end(), equal), out.bounds.end());
  for (size_t k = 0; k + 1 < out.bounds.size(); ++k) {
    std::vector<uint32_t> owners;
    for (const auto& members : layout.members) owners.push_back(members[blockAt(out.bounds[k], members.size())]);
    out.owner.push_back(std::move(owners));
  }
  return out;
}

std::vector<std::pair<uint32_t, uint32_t>> twoLevelEdges(const TwoLevelRing& ring) {
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (const auto& members : ring.layout.members) {
    for (size_t i = 0; members.size() > 1 && i < members.size(); ++i) {
      edges.emplace_back(members[i], members[(i + 1) % members.size()]);
    }
  }
  for (const auto& owners : ring.owner) {
    for (size_t r = 0; owners.size() > 1 && r < owners.size(); ++r) {
      edges.emplace_back(owners[r], owners[(r + 1) % owners.size()]);
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

std::vector<ExtraLink> twoLevelLinks(const TwoLevelRing& ring, uint32_t rank) {
  const uint32_t world = static_cast<uint32_t>(ring.layout.ranks());
  auto neighbours = [&](uint32_t a, uint32_t b) { return (a + 1) % world == b || (b + 1) % world == a; };
  std::vector<uint32_t> peers;
  for (const auto& [from, to] : twoLevelEdges(ring)) {
    if (from == to) continue;
    if (from == rank && !neighbours(rank, to)) peers.push_back(to);
    if (to == rank && !neighbours(rank, from)) peers.push_back(from);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  std::vector<ExtraLink> out;
  for (uint32_t p : peers) out.push_back(ExtraLink{p, rank < p});
  return out;
}

TwoLevelPart twoLevelPart(const TwoLevelRing& ring, uint32_t rank, size_t count) {
  const RegionLayout& l = ring.layout;
  TwoLevelPart out;
  out.region = l.region_of[rank];
  out.regions = static_cast<uint32_t>(l.regions());
  const auto& members = l.members[out.region];
  out.region_world = static_cast<uint32_t>(members.size());
  out.region_rank = l.index_in_region[rank];
  out.region_pred = members[(out.region_rank + out.region_world - 1) % out.region_world];
  out.region_succ = members[(out.region_rank + 1) % out.region_world];
  for (uint32_t j = 0; j < out.region_world; ++j) out.blocks.push_back(cutOf(count, out.region_world, j));
  out.block = out.blocks[out.region_rank];
  for (size_t k = 0; k < ring.pieces(); ++k) {
    const auto& owners = ring.owner[k];
    if (owners[out.region] != rank) continue;
    const size_t begin = cutAt(count, ring.bounds[k].num, ring.bounds[k].den);
    const size_t end = cutAt(count, ring.bounds[k + 1].num, ring.bounds[k + 1].den);
    if (end == begin) continue;
    TwoLevelPart::Piece p;
    p.id = static_cast<uint32_t>(k);
    p.span = Span{begin, end - begin};
    p.pred = owners[(out.region + out.regions - 1) % out.regions];
    p.succ = owners[(out.region + 1) % out.regions];
    out.pieces.push_back(p);
  }
  return out;
}

uint32_t twoLevelWaves(size_t bytes) {
  const size_t w = (bytes + kTwoLevelWaveBytes - 1) / kTwoLevelWaveBytes;
  return static_cast<uint32_t>(std::clamp<size_t>(w, 1, kMaxTwoLevelWaves));
}

uint32_t twoLevelCallWaves(size_t bytes) {
  if (bytes <= kTwoLevelWaveBytes) return 1;
  const size_t w = (bytes + kTwoLevelWaveBytes - 1) / kTwoLevelWaveBytes + 1;
  return static_cast<uint32_t>(std::min<size_t>(w, kMaxTwoLevelWaves));
}

Span twoLevelWaveOf(size_t count, uint32_t waves, uint32_t w) {
  if (waves < 3) return cutOf(count, waves, w);
  // Units: 1 for the first and the last wave, 2 for each other.
  const uint64_t total = 2 * uint64_t{waves} - 2;
  const auto units = [&](uint32_t i) -> uint64_t { return i == 0 ? 0 : i == waves ? total : 2 * uint64_t{i} - 1; };
  const size_t begin = cutAt(count, units(w), total);
  return Span{begin, cutAt(count, units(w + 1), total) - begin};
}

TwoLevelCall twoLevelCall(const TwoLevelRing& ring, uint32_t rank, size_t count, size_t elem_size) {
  TwoLevelCall out;
  const uint32_t waves = twoLevelCallWaves(count * elem_size);
  for (uint32_t w = 0; w < waves; ++w) {
    out.waves.push_back(twoLevelWaveOf(count, waves, w));
    out.parts.push_back(twoLevelPart(ring, rank, out.waves.back().count));
  }
  return out;
}

namespace {
std::vector<uint32_t> ranksOf(const TwoLevelCall& call, bool senders) {
  std::vector<uint32_t> out;
  for (const auto& part : call.parts) {
    if (part.region_world > 1) out.push_back(senders ? part.region_pred : part.region_succ);
    for (const auto& p : part.pieces) out.push_back(senders ? p.pred : p.succ);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
}  // namespace

std::vector<uint32_t> TwoLevelCall::senders() const { return ranksOf(*this, true); }
std::vector<uint32_t> TwoLevelCall::receivers() const { return ranksOf(*this, false); }

TwoLevelGatherPlan twoLevelGatherPlan(const TwoLevelRing& ring, uint32_t rank) {
  const TwoLevelPart part = twoLevelPart(ring, rank, 0);
  TwoLevelGatherPlan out;
  out.region = part.region;
  out.regions = part.regions;
  out.region_rank = part.region_rank;
  out.region_world = part.region_world;
  out.region_pred = part.region_pred;
  out.region_succ = part.region_succ;
  out.leader = part.region_rank == 0;
  if (out.leader && !ring.owner.empty()) {
    const auto& leaders = ring.owner[0];
    out.leader_pred = leaders[(out.region + out.regions - 1) % out.regions];
    out.leader_succ = leaders[(out.region + 1) % out.regions];
  }
  return out;
}

std::vector<uint32_t> TwoLevelGatherPlan::receivers() const {
  std::vector<uint32_t> out;
  if (region_world > 1) out = {region_pred, region_succ};
  if (leader && regions > 1) {
    out.push_back(leader_pred);
    out.push_back(leader_succ);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<uint32_t> twoLevelPeers(const TwoLevelRing& ring, uint32_t rank) {
  std::vector<uint32_t> out;
  for (const auto& [from, to] : twoLevelEdges(ring)) {
    if (from == rank && to != rank) out.push_back(to);
    if (to == rank && from != rank) out.push_back(from);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TwoLevelBlocks twoLevelBlocks(const RegionLayout& layout, size_t block) {
  TwoLevelBlocks out;
  out.block = block;
  out.sorted_at.assign(layout.ranks(), 0);
  size_t at = 0;
  for (const auto& members : layout.members) {
    out.data.push_back(Span{at, members.size() * block});
    for (uint32_t rank : members) {
      out.sorted_at[rank] = at;
      out.identity = out.identity && at == rank * block;
      at += block;
    }
  }
  return out;
}

TwoLevelBlocks TwoLevelBlocks::wave(uint32_t w, uint32_t waves) const {
  const size_t sub = cutOf(block, waves, w).count;
  TwoLevelBlocks out;
  out.block = sub;
  out.identity = identity && waves == 1;
  // Every span is a whole number of blocks: the same count of sub-blocks.
  const auto scaled = [&](size_t elements) { return block == 0 ? 0 : elements / block * sub; };
  for (const Span& d : data) out.data.push_back(Span{scaled(d.offset), scaled(d.count)});
  for (size_t at : sorted_at) out.sorted_at.push_back(scaled(at));
  return out;
}

uint32_t twoLevelLayoutWaves(const TwoLevelRing& ring, size_t bytes) {
  const size_t slots = ring.pieces() + 2 + ring.layout.regions();
  const size_t fit = std::max<size_t>(kTwoLevelPartIds / slots, 1);
  return static_cast<uint32_t>(std::min<size_t>(twoLevelWaves(bytes), fit));
}

Span TwoLevelBlocks::piece(const TwoLevelRing& ring, size_t k, uint32_t r) const {
  const Span d = data[r];
  const size_t begin = cutAt(d.count, ring.bounds[k].num, ring.bounds[k].den);
  const size_t end = cutAt(d.count, ring.bounds[k + 1].num, ring.bounds[k + 1].den);
  return Span{d.offset + begin, end - begin};
}

std::vector<Span> TwoLevelBlocks::pieceBlocks(const TwoLevelRing& ring, size_t k) const {
  std::vector<Span> out;
  size_t elements = 0;
  for (uint32_t r = 0; r < data.size(); ++r) {
    out.push_back(piece(ring, k, r));
    elements += out.back().count;
  }
  if (elements == 0) out.clear();  // a small call leaves the piece empty in every region
  return out;
}

Span TwoLevelBlocks::fraction(uint32_t r, uint32_t members, uint32_t j) const {
  const Span f = cutOf(data[r].count, members, j);
  return Span{data[r].offset + f.offset, f.count};
}

}  // namespace pccl::collective
