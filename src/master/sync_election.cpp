#include "master/sync_election.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "wire/control_messages.hpp"

namespace pccl::master {

namespace {

using wire::SyncStrategy;

using Schema = std::map<std::string, std::pair<uint8_t, uint64_t>>;  // name -> (dtype, count)

bool offers(const SyncParticipant& p) {
  return p.announce.strategy != static_cast<uint8_t>(SyncStrategy::kReceiveOnly);
}
bool receives(const SyncParticipant& p) {
  return p.announce.strategy != static_cast<uint8_t>(SyncStrategy::kSendOnly);
}

Result<Schema> schemaOf(const wire::SyncAnnounce& a) {
  Schema s;
  for (const auto& k : a.keys) {
    if (!s.emplace(k.name, std::make_pair(k.dtype, k.count)).second) {
      return Status::invalidArgument(fmt::format("shared-state key '{}' is registered twice", k.name));
    }
  }
  return s;
}

// The first difference between a peer's schema and the reference, for its error message.
std::string difference(const Schema& mine, const Schema& ref) {
  for (const auto& [name, v] : ref) {
    auto it = mine.find(name);
    if (it == mine.end()) return fmt::format("key '{}' is missing here", name);
    if (it->second.first != v.first) {
      return fmt::format("key '{}' has dtype {} here, {} on the others", name, it->second.first, v.first);
    }
    if (it->second.second != v.second) {
      return fmt::format("key '{}' has {} elements here, {} on the others", name, it->second.second, v.second);
    }
  }
  for (const auto& kv : mine) {
    if (ref.count(kv.first) == 0) return fmt::format("key '{}' is unknown to the others", kv.first);
  }
  return "the key sets differ";
}

}  // namespace

SyncElection electSharedState(const std::vector<SyncParticipant>& peers) {
  SyncElection e;
  e.plans.resize(peers.size());
  std::vector<Schema> schemas(peers.size());
  std::vector<bool> valid(peers.size(), false);
  for (size_t i = 0; i < peers.size(); ++i) {
    auto s = schemaOf(peers[i].announce);
    if (!s.isOk()) {
      e.plans[i].status = s.status();
      continue;
    }
    schemas[i] = std::move(s).value();
    valid[i] = true;
  }
  // The reference schema: the most common among the candidates at their highest revision.
  uint64_t top = 0;
  bool any = false;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (valid[i] && offers(peers[i])) {
      top = any ? std::max(top, peers[i].announce.revision) : peers[i].announce.revision;
      any = true;
    }
  }
  if (!any) {
    for (size_t i = 0; i < peers.size(); ++i) {
      if (e.plans[i].status.isOk()) {
        e.plans[i].status = Status::invalidUsage(
            "no peer offers shared state: at least one must sync with enforce-popular or send-only");
      }
    }
    return e;
  }
  size_t ref = peers.size();
  size_t best_votes = 0;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!valid[i] || !offers(peers[i]) || peers[i].announce.revision != top) continue;
    size_t votes = 0;
    for (size_t j = 0; j < peers.size(); ++j) {
      if (valid[j] && offers(peers[j]) && peers[j].announce.revision == top && schemas[j] == schemas[i]) ++votes;
    }
    if (votes > best_votes) {
      best_votes = votes;
      ref = i;
    }
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    if (valid[i] && schemas[i] != schemas[ref]) {
      valid[i] = false;
      e.plans[i].status = Status::invalidArgument("shared state differs in its keys from the other peers': " +
                                           difference(schemas[i], schemas[ref]));
    }
  }
  // The revision among the candidates that kept the reference schema (ref is one of them, at `top`).
  e.revision = top;
  // Per peer, its key index by name (the schemas are equal, the orders need not be).
  std::vector<std::map<std::string, uint32_t>> index_of(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!valid[i]) continue;
    for (uint32_t k = 0; k < peers[i].announce.keys.size(); ++k) index_of[i][peers[i].announce.keys[k].name] = k;
  }
  // Per key (in the reference peer's order), the popular digest at that revision.
  for (uint32_t k = 0; k < peers[ref].announce.keys.size(); ++k) {
    const std::string& name = peers[ref].announce.keys[k].name;
    std::vector<std::pair<wire::Digest32, size_t>> tally;  // digest -> votes
    std::vector<const wire::SyncKey*> key_of(peers.size(), nullptr);
    for (size_t i = 0; i < peers.size(); ++i) {
      if (!valid[i]) continue;
      key_of[i] = &peers[i].announce.keys[index_of[i].at(name)];
      if (!offers(peers[i]) || peers[i].announce.revision != top) continue;
      auto it = std::find_if(tally.begin(), tally.end(), [&](const auto& t) { return t.first == key_of[i]->digest; });
      if (it == tally.end()) {
        tally.emplace_back(key_of[i]->digest, 1);
      } else {
        ++it->second;
      }
    }
    const auto win = std::min_element(tally.begin(), tally.end(), [](const auto& a, const auto& b) {
      return std::tie(b.second, a.first) < std::tie(a.second, b.first);  // most votes, then smallest digest
    });
    std::vector<wire::Uuid> sources;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (valid[i] && key_of[i]->digest == win->first) sources.push_back(peers[i].id);
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      if (!valid[i] || !receives(peers[i]) || key_of[i]->digest == win->first) continue;
      const auto index = static_cast<uint32_t>(key_of[i] - peers[i].announce.keys.data());
      std::vector<wire::Uuid> mine;
      for (size_t j = 0; j < peers.size(); ++j) {  // the holders it can dial
        const bool dialable = peers[j].inbound || wire::sameHost(peers[j].host, peers[i].host);
        if (std::find(sources.begin(), sources.end(), peers[j].id) != sources.end() && dialable) {
          mine.push_back(peers[j].id);
        }
      }
      if (mine.empty()) {
        e.plans[i].status = Status::unsupported(fmt::format(
            "shared-state key '{}': every peer that holds the elected content ({}) cannot be dialled, and neither "
            "can this peer: no transfer can connect (no relay yet, docs/concepts.md \"Reachability\")",
            name, wire::shortId(sources.front())));
        e.plans[i].fetches.clear();
        valid[i] = false;
        continue;
      }
      if (mine.size() > wire::kMaxSyncFetchSources) {  // a window of the holders, rotated per receiver
        std::rotate(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(i % mine.size()), mine.end());
        mine.resize(wire::kMaxSyncFetchSources);
      }
      e.plans[i].fetches.push_back(wire::SyncFetch{index, win->first, std::move(mine)});
    }
  }
  // A peer that cannot take part serves no one: its place as a source is dropped (a fetch left with none
  // fails its receiver alike).
  for (size_t i = 0; i < peers.size(); ++i) {
    if (e.plans[i].status.isOk()) continue;
    for (size_t r = 0; r < peers.size(); ++r) {
      for (wire::SyncFetch& f : e.plans[r].fetches) {
        f.sources.erase(std::remove(f.sources.begin(), f.sources.end(), peers[i].id), f.sources.end());
        if (f.sources.empty() && e.plans[r].status.isOk()) e.plans[r].status = e.plans[i].status;
      }
      if (!e.plans[r].status.isOk()) e.plans[r].fetches.clear();
    }
  }
  return e;
}

}  // namespace pccl::master
