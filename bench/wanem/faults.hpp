// Network faults for pccl-wanem (docs/wanem.md, "Faults"): blackouts, loss bursts, connection resets and
// route changes, scheduled from a file (`--faults`, each line `at TIME ...`) or written to a FIFO while the
// commands run (`--control`, the same lines without `at`). This file parses them into Fault values; the
// router applies them (router.hpp, Router::applyFault). Pure: parsing only.
//
//   at 5s down 2 for 3s                   rank 2 loses every packet, both ways, for 3 s
//   at 5s down 0 -> 1 for 3s              only the path 0 -> 1
//   at 8s burst 1 -> 2 loss=30 for 2s     30 % of the segments on 1 -> 2 lost at random for 2 s
//   at 10s reset 0 -> 1                   every TCP connection between 0 and 1 is reset, both ends
//   at 10s forget 0 -> 1                  ... dropped silently instead (a NAT that lost its state: no RST)
//   at 20s path eu us delay=60            a route change: a paths-file 'path' line, from then on
//   at phase+1s down 0 -> 1 for 2s        1 s after the next timed operation starts (pccl-bench's mark)
//   at +2s reset 0 -> 1                   2 s after the fault before it was applied
//
// A rank may be a number or a region of the paths file's 'rank' lines (every rank of it).
#ifndef PCCL_WANEM_FAULTS_HPP_
#define PCCL_WANEM_FAULTS_HPP_

#include <functional>
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "topology.hpp"

namespace pccl::wanem {

struct Fault {
  enum class Kind { kDown, kBurst, kReset, kForget, kPath };
  Kind kind = Kind::kDown;
  enum class Base { kStart, kPhase, kPrevious };
  Base base = Base::kStart;               // at_s counts from: the commands' start (`at 5s`), the next timed
                                          // operation's start mark (`at phase+1s`), the previous fault (`at +2s`)
  double at_s = 0;
  std::vector<std::pair<int, int>> pairs; // the ordered (src, dst) paths it acts on (kPath: none)
  double for_s = 0;                       // kDown, kBurst: how long
  double loss = 0;                        // kBurst: probability per segment
  std::string path_line;                  // kPath: the paths-file line it applies
  std::string text;                       // the line as written, for the log
};

const char* kindName(Fault::Kind k);

// Checks a route change: builds the topology with `path_line` added to the paths file's lines (false and
// *error when the line is bad). The router's callback for kPath faults uses the same function.
using PathCheck = std::function<bool(const std::string& path_line, Topology* out, std::string* error)>;

// One line. `scheduled`: it must start with `at TIME` (a --faults file); else it must not (--control).
// Blank and comment-only lines give false with an empty *error.
bool parseFaultLine(const std::string& line, bool scheduled, const Topology& topo, const PathCheck& check,
                    Fault* out, std::string* error);

// A --faults file: every line scheduled; a bad line is refused as "NAME:LINE: reason (in '...')".
bool parseFaultsFile(std::istream& in, const std::string& name, const Topology& topo, const PathCheck& check,
                     std::vector<Fault>* out, std::string* error);

// "5s", "500ms", "1.5s": seconds; false when it is not a non-negative time with a unit.
bool parseDuration(const std::string& text, double* seconds);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_FAULTS_HPP_
