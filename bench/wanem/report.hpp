// What pccl-wanem says about a run: one line per timed phase and one for the whole run on stderr, and the
// same as JSON for --stats (keys documented in docs/wanem.md, "Statistics").
#ifndef PCCL_WANEM_REPORT_HPP_
#define PCCL_WANEM_REPORT_HPP_

#include <ostream>
#include <string>
#include <vector>

#include "router.hpp"
#include "timeline.hpp"

namespace pccl::wanem {

struct RunReport {
  Verdict run;                  // the whole run
  std::vector<Verdict> phases;  // one per label of the phases file, in order
  size_t bad_phase_lines = 0;
  RouterStats stats;
  // The verdict that decides exit status 3: every phase faithful when there are phases, else the run's.
  bool faithful() const;
};

void printReport(const RunReport& r, std::FILE* out);
void writeJson(const RunReport& r, std::ostream& out);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_REPORT_HPP_
