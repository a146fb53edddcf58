#include "topology.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

namespace pccl::wanem {

namespace {
constexpr double kMinBdpQueueBytes = 64 * 1024;  // a BDP-sized queue holds at least one GSO super-packet

bool allDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// A link's settings as written, before its queue size can be worked out.
struct LinkDraft {
  double rate_mbit = 0;
  QueueSpec queue;
};

struct Draft {
  std::vector<LinkDraft> up, down;
  std::vector<std::vector<PathModel>> paths;
  std::vector<std::vector<LinkDraft>> path_links;
  std::map<std::string, std::vector<int>> regions;
  std::vector<EdgeKind> edge;
};

// "key=value" settings of a path or link line.
struct Settings {
  std::map<std::string, std::string> kv;
  bool get(const std::string& key, double* v, std::string* error) const {
    auto it = kv.find(key);
    if (it == kv.end()) return true;
    if (!parseNumber(it->second, v)) return *error = key + "=" + it->second + " is not a non-negative number", false;
    return true;
  }
};

bool parseSettings(std::istringstream& in, const std::vector<std::string>& allowed, Settings* s, std::string* error) {
  std::string tok;
  while (in >> tok) {
    const size_t eq = tok.find('=');
    const std::string key = tok.substr(0, eq);
    if (eq == std::string::npos || std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string keys;
      for (const auto& a : allowed) keys += (keys.empty() ? "" : ", ") + a;
      return *error = "'" + tok + "': expected KEY=VALUE with KEY one of " + keys, false;
    }
    s->kv[key] = tok.substr(eq + 1);
  }
  return true;
}

// The ranks a token names: a rank number, or every rank of a region.
bool ranksOf(const Draft& d, int ranks, const std::string& tok, std::vector<int>* out, std::string* error) {
  if (allDigits(tok)) {
    const int r = std::atoi(tok.c_str());
    if (r >= ranks) return *error = "rank " + tok + " does not exist (--ranks " + std::to_string(ranks) + ")", false;
    *out = {r};
    return true;
  }
  auto it = d.regions.find(tok);
  if (it == d.regions.end()) return *error = "unknown region '" + tok + "' (declare it with 'rank I " + tok + "')", false;
  *out = it->second;
  return true;
}

bool applyLink(const Settings& s, LinkDraft* l, std::string* error) {
  if (!s.get("rate", &l->rate_mbit, error)) return false;
  auto q = s.kv.find("queue");
  if (q != s.kv.end() && !parseQueueSpec(q->second, &l->queue)) return *error = "bad queue size '" + q->second + "'", false;
  return true;
}

bool applyPath(const Settings& s, PathModel* p, LinkDraft* l, std::string* error) {
  double loss_pct = p->loss * 100;
  if (!s.get("delay", &p->delay_ms, error) || !s.get("jitter", &p->jitter_ms, error) || !s.get("loss", &loss_pct, error)) {
    return false;
  }
  if (loss_pct > 100) return *error = "loss above 100 %", false;
  p->loss = loss_pct / 100;
  return applyLink(s, l, error);
}

// One line of the paths file (after the 'rank' lines were read).
bool applyLine(const std::string& kind, std::istringstream& in, int ranks, Draft* d, std::string* error) {
  if (kind == "rank") return true;
  if (kind == "delay" || kind == "loss") {  // the original two-region form: both directions
    std::string a, b, v;
    if (!(in >> a >> b >> v)) return *error = "expected '" + kind + " A B VALUE'", false;
    std::istringstream rest(kind + "=" + v);
    Settings s;
    if (!parseSettings(rest, {kind}, &s, error)) return false;
    std::vector<int> as, bs;
    if (!ranksOf(*d, ranks, a, &as, error) || !ranksOf(*d, ranks, b, &bs, error)) return false;
    for (int i : as) {
      for (int j : bs) {
        if (i == j) continue;
        if (!applyPath(s, &d->paths[i][j], &d->path_links[i][j], error)) return false;
        if (!applyPath(s, &d->paths[j][i], &d->path_links[j][i], error)) return false;
      }
    }
    return true;
  }
  if (kind == "rate" || kind == "link" || kind == "uplink" || kind == "downlink") {
    std::string who;
    if (!(in >> who)) return *error = "expected '" + kind + " RANK ...'", false;
    Settings s;
    if (kind == "rate") {
      std::string v;
      if (!(in >> v)) return *error = "expected 'rate RANK MBIT'", false;
      s.kv["rate"] = v;
    } else if (!parseSettings(in, {"rate", "queue"}, &s, error)) {
      return false;
    }
    std::vector<int> rs;
    if (!ranksOf(*d, ranks, who, &rs, error)) return false;
    for (int r : rs) {
      if (kind != "downlink" && !applyLink(s, &d->up[r], error)) return false;
      if (kind != "uplink" && !applyLink(s, &d->down[r], error)) return false;
    }
    return true;
  }
  if (kind == "path") {
    std::string a, b;
    if (!(in >> a >> b)) return *error = "expected 'path A B KEY=VALUE...' or 'path A -> B KEY=VALUE...'", false;
    const bool one_way = b == "->";
    if (one_way && !(in >> b)) return *error = "expected 'path A -> B KEY=VALUE...'", false;
    Settings s;
    if (!parseSettings(in, {"delay", "jitter", "loss", "rate", "queue"}, &s, error)) return false;
    std::vector<int> as, bs;
    if (!ranksOf(*d, ranks, a, &as, error) || !ranksOf(*d, ranks, b, &bs, error)) return false;
    for (int i : as) {
      for (int j : bs) {
        if (i == j) continue;
        if (!applyPath(s, &d->paths[i][j], &d->path_links[i][j], error)) return false;
        if (!one_way && !applyPath(s, &d->paths[j][i], &d->path_links[j][i], error)) return false;
      }
    }
    return true;
  }
  if (kind == "firewall" || kind == "nat") {
    std::string who, what;
    EdgeKind k = EdgeKind::kFirewall;
    if (!(in >> who) || (kind == "nat" && (!(in >> what) || !parseEdgeKind(what, &k)))) {
      return *error = kind == "nat" ? "expected 'nat RANK cone' or 'nat RANK symmetric'" : "expected 'firewall RANK'", false;
    }
    std::string extra;
    if (in >> extra) return *error = "unexpected '" + extra + "' after '" + kind + " " + who + (what.empty() ? "" : " " + what) + "'", false;
    std::vector<int> rs;
    if (!ranksOf(*d, ranks, who, &rs, error)) return false;
    for (int r : rs) d->edge[static_cast<size_t>(r)] = k;
    return true;
  }
  return *error = "unknown line kind '" + kind + "'", false;
}

LinkParams resolve(const LinkDraft& l, double rtt_ms) {
  LinkParams p;
  p.rate_mbit = l.rate_mbit;
  const double bytes_per_ms = l.rate_mbit * 1e6 / 8 / 1000;
  switch (l.queue.kind) {
    case QueueSpec::Kind::kBytes: p.queue_bytes = static_cast<uint64_t>(l.queue.value); break;
    case QueueSpec::Kind::kMs: p.queue_bytes = static_cast<uint64_t>(l.queue.value * bytes_per_ms); break;
    case QueueSpec::Kind::kBdp:
      p.queue_bytes = static_cast<uint64_t>(std::max(kMinBdpQueueBytes, l.queue.value * bytes_per_ms * rtt_ms));
      break;
  }
  return p;
}
}  // namespace

bool parseNumber(const std::string& s, double* v) {
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && end != nullptr && *end == '\0' && *v >= 0;
}

bool parseQueueSpec(const std::string& text, QueueSpec* out) {
  auto ends = [&](const std::string& suffix) {
    return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  QueueSpec q;
  std::string num = text;
  double scale = 1;
  if (ends("bdp")) {
    q.kind = QueueSpec::Kind::kBdp;
    num = text.substr(0, text.size() - 3);
  } else if (ends("ms")) {
    q.kind = QueueSpec::Kind::kMs;
    num = text.substr(0, text.size() - 2);
  } else {
    q.kind = QueueSpec::Kind::kBytes;
    if (ends("k") || ends("K")) scale = 1024, num = text.substr(0, text.size() - 1);
    if (ends("m") || ends("M")) scale = 1024 * 1024, num = text.substr(0, text.size() - 1);
  }
  if (!parseNumber(num, &q.value)) return false;
  q.value *= scale;
  *out = q;
  return true;
}

std::string toString(const QueueSpec& q) {
  std::ostringstream s;
  s << q.value << (q.kind == QueueSpec::Kind::kBdp ? "bdp" : q.kind == QueueSpec::Kind::kMs ? "ms" : " bytes");
  return s.str();
}

double Topology::rttMs(int a, int b) const {
  const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
  return paths[ua][ub].delay_ms + paths[ub][ua].delay_ms;
}

double Topology::bottleneckMbit(int src, int dst) const {
  const auto us = static_cast<size_t>(src), ud = static_cast<size_t>(dst);
  double r = 0;
  for (double x : {uplink[us].rate_mbit, paths[us][ud].link.rate_mbit, downlink[ud].rate_mbit}) {
    if (x > 0) r = r > 0 ? std::min(r, x) : x;
  }
  return r;
}

bool buildTopology(const TopologyDefaults& def, std::istream* file, const std::string& name, Topology* out,
                   std::string* error) {
  const int n = def.ranks;
  const auto un = static_cast<size_t>(n);
  Draft d;
  d.up.assign(un, LinkDraft{def.rate_mbit, def.queue});
  d.down = d.up;
  d.paths.assign(un, std::vector<PathModel>(un, PathModel{def.delay_ms, def.jitter_ms, def.loss_pct / 100.0, {}}));
  d.path_links.assign(un, std::vector<LinkDraft>(un, LinkDraft{0, def.queue}));
  d.edge.assign(un, EdgeKind::kOpen);
  std::vector<std::string> lines;
  if (file != nullptr) {
    std::string line;
    while (std::getline(*file, line)) lines.push_back(line.substr(0, line.find('#')));
  }
  // Pass 1: regions. Pass 2: everything else, in file order (a later line overrides an earlier one).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < lines.size(); ++k) {
      std::istringstream in(lines[k]);
      std::string kind;
      if (!(in >> kind)) continue;
      bool ok = true;
      if (pass == 0 && kind == "rank") {
        std::string r, region;
        ok = static_cast<bool>(in >> r >> region) && allDigits(r) && std::atoi(r.c_str()) < n && !allDigits(region);
        if (ok) d.regions[region].push_back(std::atoi(r.c_str()));
        if (!ok) *error = "expected 'rank I REGION' with I < " + std::to_string(n) + " and a REGION name that is not a number";
      } else if (pass == 1) {
        ok = applyLine(kind, in, n, &d, error);
      }
      if (!ok) return *error = name + ":" + std::to_string(k + 1) + ": " + *error + " (in '" + lines[k] + "')", false;
    }
  }
  Topology t;
  t.ranks = n;
  t.paths = d.paths;
  t.edge = d.edge;
  t.region.assign(un, "");
  for (const auto& [region, members] : d.regions) {
    for (int r : members) t.region[static_cast<size_t>(r)] = region;
  }
  for (size_t r = 0; r < un; ++r) {
    double rtt = 0;  // the longest round trip through r's links, jitter included
    for (size_t o = 0; o < un; ++o) {
      if (o == r) continue;
      const PathModel &there = d.paths[r][o], &back = d.paths[o][r];
      rtt = std::max(rtt, there.delay_ms + back.delay_ms + there.jitter_ms + back.jitter_ms);
    }
    t.uplink.push_back(resolve(d.up[r], rtt));
    t.downlink.push_back(resolve(d.down[r], rtt));
  }
  for (size_t s = 0; s < un; ++s) {
    for (size_t r = 0; r < un; ++r) {
      const double rtt = d.paths[s][r].delay_ms + d.paths[r][s].delay_ms;
      t.paths[s][r].link = resolve(d.path_links[s][r], s == r ? 0 : rtt);
    }
  }
  *out = std::move(t);
  return true;
}

}  // namespace pccl::wanem
