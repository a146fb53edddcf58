#include "report.hpp"

#include <cmath>
#include <cstdio>

namespace pccl::wanem {

namespace {
std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

void binJson(const Bin& b, std::ostream& out) {
  out << "\"packets\": " << b.packets << ", \"segments\": " << b.segments << ", \"bytes\": " << b.bytes
      << ", \"lost_random\": " << b.lost_random << ", \"queue_drops\": " << b.queue_drops
      << ", \"emulator_drops\": " << b.emulator_drops << ", \"late_p50_us\": " << b.late.quantile(0.5)
      << ", \"late_p99_us\": " << b.late.quantile(0.99) << ", \"late_max_us\": " << b.late.max()
      << ", \"tun_wait_p50_us\": " << b.tun_wait.quantile(0.5) << ", \"tun_wait_p99_us\": " << b.tun_wait.quantile(0.99)
      << ", \"wake_p99_us\": " << b.wake.quantile(0.99) << ", \"wake_max_us\": " << b.wake.max();
}

void linkJson(const char* name, const LinkStats& s, std::ostream& out) {
  out << "\"" << name << "\": {\"segments\": " << s.segments << ", \"bytes\": " << s.bytes << ", \"dropped\": " << s.dropped
      << ", \"max_queue_delay_ms\": " << s.max_queue_delay_ns / 1e6 << ", \"min_drop_backlog_bytes\": "
      << (std::isinf(s.min_drop_backlog) ? -1.0 : s.min_drop_backlog) << "}";
}

void printVerdict(const char* what, const Verdict& v, std::FILE* out) {
  const Bin& b = v.bin;
  std::fprintf(out,
               "pccl-wanem: %s%s: %llu packets (%llu segments, %.1f MB), %llu segments lost on purpose, %llu dropped "
               "by full bottleneck queues, emulator drops %llu, lateness p50 %.0f us p99 %.0f us max %.0f us (TUN wait p99 %.0f us), reader "
               "wake-up p99 %.0f us: %s%s%s\n",
               what, v.label.c_str(), static_cast<unsigned long long>(b.packets),
               static_cast<unsigned long long>(b.segments), static_cast<double>(b.bytes) / 1e6,
               static_cast<unsigned long long>(b.lost_random), static_cast<unsigned long long>(b.queue_drops),
               static_cast<unsigned long long>(b.emulator_drops), b.late.quantile(0.5), b.late.quantile(0.99),
               b.late.max(), b.tun_wait.quantile(0.99), b.wake.quantile(0.99), v.faithful ? "faithful" : "NOT FAITHFUL (results invalid: ",
               v.why.c_str(), v.faithful ? "" : ")");
}
}  // namespace

bool RunReport::faithful() const {
  if (phases.empty()) return run.faithful;
  for (const auto& p : phases) {
    if (!p.faithful) return false;
  }
  return true;
}

void printReport(const RunReport& r, std::FILE* out) {
  for (const auto& p : r.phases) printVerdict("phase ", p, out);
  if (r.bad_phase_lines != 0) std::fprintf(out, "pccl-wanem: %zu malformed line(s) in the phases file ignored\n", r.bad_phase_lines);
  printVerdict("whole run", r.run, out);
  const auto& s = r.stats;
  std::fprintf(out,
               "pccl-wanem: bottleneck queues: uplinks dropped %llu segments (longest wait %.2f ms), downlinks %llu "
               "(%.2f ms), paths %llu (%.2f ms)\n",
               static_cast<unsigned long long>(s.uplinks.dropped), s.uplinks.max_queue_delay_ns / 1e6,
               static_cast<unsigned long long>(s.downlinks.dropped), s.downlinks.max_queue_delay_ns / 1e6,
               static_cast<unsigned long long>(s.paths.dropped), s.paths.max_queue_delay_ns / 1e6);
  const FaultCounts& f = s.faults;
  if (f.down + f.burst + f.reset + f.forget + f.path > 0) {
    std::fprintf(out,
                 "pccl-wanem: faults applied: %llu down, %llu burst, %llu reset, %llu forget, %llu path; segments lost "
                 "to blackouts %llu, to bursts %llu; RSTs sent %llu\n",
                 static_cast<unsigned long long>(f.down), static_cast<unsigned long long>(f.burst),
                 static_cast<unsigned long long>(f.reset), static_cast<unsigned long long>(f.forget),
                 static_cast<unsigned long long>(f.path),
                 static_cast<unsigned long long>(f.down_segments), static_cast<unsigned long long>(f.burst_segments),
                 static_cast<unsigned long long>(f.resets_sent));
  }
  for (size_t i = 0; i < s.edges.size(); ++i) {
    const EdgeCounts& e = s.edges[i];
    if (e.out_translated + e.in_translated + e.in_refused + e.mappings == 0) continue;
    std::fprintf(out,
                 "pccl-wanem: rank %zu's edge: %llu packets out translated, %llu in let through, %llu in refused, "
                 "%llu public ports\n",
                 i, static_cast<unsigned long long>(e.out_translated), static_cast<unsigned long long>(e.in_translated),
                 static_cast<unsigned long long>(e.in_refused), static_cast<unsigned long long>(e.mappings));
  }
  if (!r.phases.empty()) {
    std::fprintf(out, "pccl-wanem: verdict over the %zu timed phase(s): %s\n", r.phases.size(),
                 r.faithful() ? "faithful" : "NOT FAITHFUL");
  }
}

void writeJson(const RunReport& r, std::ostream& out) {
  out << "{";
  binJson(r.run.bin, out);
  out << ", \"unknown\": " << r.stats.unknown << ", \"run_faithful\": " << (r.run.faithful ? "true" : "false")
      << ", \"run_why\": " << jsonString(r.run.why) << ", \"faithful\": " << (r.faithful() ? "true" : "false")
      << ", \"verdict_scope\": \"" << (r.phases.empty() ? "run" : "phases") << "\", \"links\": {";
  linkJson("uplink", r.stats.uplinks, out);
  out << ", ";
  linkJson("downlink", r.stats.downlinks, out);
  out << ", ";
  linkJson("path", r.stats.paths, out);
  const FaultCounts& f = r.stats.faults;
  out << "}, \"faults\": {\"down\": " << f.down << ", \"burst\": " << f.burst << ", \"reset\": " << f.reset
      << ", \"forget\": " << f.forget << ", \"path\": " << f.path << ", \"down_segments\": " << f.down_segments
      << ", \"burst_segments\": " << f.burst_segments << ", \"resets_sent\": " << f.resets_sent;
  out << "}, \"edges\": [";
  for (size_t i = 0; i < r.stats.edges.size(); ++i) {
    const EdgeCounts& e = r.stats.edges[i];
    out << (i ? ", " : "") << "{\"rank\": " << i << ", \"out_translated\": " << e.out_translated
        << ", \"in_passed\": " << e.in_translated << ", \"in_refused\": " << e.in_refused
        << ", \"public_ports\": " << e.mappings << "}";
  }
  out << "], \"paths\": [";
  bool first = true;
  for (size_t i = 0; i < r.stats.paths_count.size(); ++i) {
    for (size_t j = 0; j < r.stats.paths_count[i].size(); ++j) {
      const PathCount& c = r.stats.paths_count[i][j];
      if (c.segments == 0) continue;
      out << (first ? "" : ", ") << "{\"src\": " << i << ", \"dst\": " << j << ", \"segments\": " << c.segments
          << ", \"lost_random\": " << c.lost << "}";
      first = false;
    }
  }
  out << "], \"phases\": [";
  for (size_t i = 0; i < r.phases.size(); ++i) {
    const auto& p = r.phases[i];
    out << (i ? ",\n  " : "\n  ") << "{\"label\": " << jsonString(p.label) << ", \"faithful\": "
        << (p.faithful ? "true" : "false") << ", \"why\": " << jsonString(p.why) << ", ";
    binJson(p.bin, out);
    out << "}";
  }
  out << "]}\n";
}

}  // namespace pccl::wanem
