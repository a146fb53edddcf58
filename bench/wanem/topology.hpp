// The emulated network as data: every rank's access link (uplink: rank -> internet, downlink: internet ->
// rank, each a rate and a drop-tail queue) and every ordered pair's path (one-way delay, jitter, random
// loss per segment, and optionally a bottleneck of its own). Built from the command line's defaults and
// an optional paths file (format in docs/wanem.md, "Paths file"). Pure: parsing and arithmetic only.
#ifndef PCCL_WANEM_TOPOLOGY_HPP_
#define PCCL_WANEM_TOPOLOGY_HPP_

#include <istream>
#include <string>
#include <vector>

#include "edge.hpp"
#include "link.hpp"

namespace pccl::wanem {

// A queue size as written: bytes ("600000", "512k", "2m"), time at the link's rate ("20ms"), or bandwidth-
// delay products ("1bdp": the link's rate times the longest round trip of a path through it).
struct QueueSpec {
  enum class Kind { kBytes, kMs, kBdp } kind = Kind::kBdp;
  double value = 1;
};
bool parseQueueSpec(const std::string& text, QueueSpec* out);
// A non-negative decimal number, the whole of `s` (the paths file's and the faults' values).
bool parseNumber(const std::string& s, double* v);
std::string toString(const QueueSpec& q);

struct PathModel {
  double delay_ms = 0;   // one way
  double jitter_ms = 0;  // extra one-way delay, uniform in [0, jitter]; never reorders the path
  double loss = 0;       // probability per TCP segment
  LinkParams link;       // a bottleneck of this path alone (rate 0 = none)
};

struct Topology {
  int ranks = 0;
  std::vector<LinkParams> uplink, downlink;   // per rank
  std::vector<std::vector<PathModel>> paths;  // [src][dst]
  std::vector<std::string> region;            // per rank: its region from the 'rank' lines, "" when none
  std::vector<EdgeKind> edge;                 // per rank: its 'firewall' / 'nat' line, else kOpen
  double rttMs(int a, int b) const;           // configured round trip a -> b -> a, jitter excluded
  double bottleneckMbit(int src, int dst) const;  // the slowest rate on src -> dst (0 = unlimited)
};

struct TopologyDefaults {
  int ranks = 2;
  double delay_ms = 0, jitter_ms = 0, loss_pct = 0, rate_mbit = 0;
  QueueSpec queue;
};

// Builds the topology from the defaults and the paths file text (`name` is for error messages; empty
// text = no file). On a bad line, *error says which and why.
bool buildTopology(const TopologyDefaults& d, std::istream* paths_file, const std::string& name, Topology* out,
                   std::string* error);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_TOPOLOGY_HPP_
