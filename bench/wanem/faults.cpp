#include "faults.hpp"

#include <cstdlib>
#include <sstream>

namespace pccl::wanem {

namespace {

// The ranks a token names: a rank number or a region.
bool ranksOf(const Topology& topo, const std::string& tok, std::vector<int>* out, std::string* error) {
  out->clear();
  if (!tok.empty() && tok.find_first_not_of("0123456789") == std::string::npos) {
    const long r = std::strtol(tok.c_str(), nullptr, 10);
    if (r >= topo.ranks) {
      return *error = "rank " + tok + " does not exist (" + std::to_string(topo.ranks) + " ranks)", false;
    }
    out->push_back(static_cast<int>(r));
    return true;
  }
  for (int r = 0; r < topo.ranks; ++r) {
    if (topo.region[static_cast<size_t>(r)] == tok) out->push_back(r);
  }
  if (out->empty()) return *error = "'" + tok + "' is neither a rank nor a region of the paths file", false;
  return true;
}

// "A -> B": every ordered pair from A's ranks to B's. "A" alone (down only): every path into and out of A.
bool pairsOf(const Topology& topo, std::istringstream& in, bool alone_ok, std::vector<std::pair<int, int>>* pairs,
             std::string* rest, std::string* error) {
  std::string a, arrow;
  if (!(in >> a)) return *error = "expected a rank or 'A -> B'", false;
  std::vector<int> as, bs;
  if (!ranksOf(topo, a, &as, error)) return false;
  const std::streampos mark = in.tellg();
  if ((in >> arrow) && arrow == "->") {
    std::string b;
    if (!(in >> b)) return *error = "expected a rank or region after '->'", false;
    if (!ranksOf(topo, b, &bs, error)) return false;
    for (int i : as) {
      for (int j : bs) {
        if (i != j) pairs->emplace_back(i, j);
      }
    }
    if (pairs->empty()) return *error = "'" + a + " -> " + b + "' names no path between two ranks", false;
  } else {
    if (!alone_ok) return *error = "expected 'A -> B'", false;
    in.clear();
    in.seekg(mark);
    for (int i : as) {
      for (int j = 0; j < topo.ranks; ++j) {
        if (j == i) continue;
        pairs->emplace_back(i, j);
        pairs->emplace_back(j, i);
      }
    }
  }
  std::getline(in, *rest);
  return true;
}

// The words after the pairs: "for D" (required when `want_for`), "loss=P" (required when `want_loss`).
bool tail(const std::string& rest, bool want_for, bool want_loss, Fault* f, std::string* error) {
  std::istringstream in(rest);
  std::string w;
  bool have_for = false, have_loss = false;
  while (in >> w) {
    if (w == "for" && want_for && !have_for) {
      std::string d;
      if (!(in >> d) || !parseDuration(d, &f->for_s) || f->for_s <= 0) {
        return *error = "expected 'for DURATION' (e.g. 'for 3s', 'for 500ms')", false;
      }
      have_for = true;
    } else if (w.rfind("loss=", 0) == 0 && want_loss && !have_loss) {
      double pct = 0;
      if (!parseNumber(w.substr(5), &pct) || pct > 100) return *error = "expected loss=PERCENT (0..100)", false;
      f->loss = pct / 100;
      have_loss = true;
    } else {
      return *error = "unexpected '" + w + "'", false;
    }
  }
  if (want_for && !have_for) return *error = "missing 'for DURATION'", false;
  if (want_loss && !have_loss) return *error = "missing 'loss=PERCENT'", false;
  return true;
}

}  // namespace

const char* kindName(Fault::Kind k) {
  switch (k) {
    case Fault::Kind::kDown: return "down";
    case Fault::Kind::kBurst: return "burst";
    case Fault::Kind::kReset: return "reset";
    case Fault::Kind::kForget: return "forget";
    case Fault::Kind::kPath: return "path";
  }
  return "?";
}

bool parseDuration(const std::string& text, double* seconds) {
  auto ends = [&](const char* s, size_t n) { return text.size() > n && text.compare(text.size() - n, n, s) == 0; };
  // At most a year: a time point that far is a typo, and further ones overflow the clock's arithmetic.
  constexpr double kMaxS = 365 * 86400.0;
  double v = 0;
  if (ends("ms", 2) && parseNumber(text.substr(0, text.size() - 2), &v) && v / 1000 <= kMaxS) {
    return *seconds = v / 1000, true;
  }
  if (ends("s", 1) && parseNumber(text.substr(0, text.size() - 1), &v) && v <= kMaxS) return *seconds = v, true;
  return false;
}

bool parseFaultLine(const std::string& raw, bool scheduled, const Topology& topo, const PathCheck& check, Fault* out,
                    std::string* error) {
  error->clear();
  const std::string line = raw.substr(0, raw.find('#'));
  std::istringstream in(line);
  std::string word;
  if (!(in >> word)) return false;  // blank
  Fault f;
  f.text = line.substr(line.find_first_not_of(" \t"));
  while (!f.text.empty() && (f.text.back() == ' ' || f.text.back() == '\t' || f.text.back() == '\r')) f.text.pop_back();
  if (word == "at") {
    if (!scheduled) return *error = "a control line takes effect at once: leave out 'at TIME'", false;
    std::string t;
    if (!(in >> t)) return *error = "expected 'at TIME' (e.g. 'at 5s')", false;
    if (t.rfind("phase", 0) == 0) {
      f.base = Fault::Base::kPhase;
      if (t != "phase" && (t.compare(0, 6, "phase+") != 0 || !parseDuration(t.substr(6), &f.at_s))) {
        return *error = "bad time '" + t + "' (e.g. 'phase', 'phase+1s', 'phase+250ms')", false;
      }
    } else if (t[0] == '+') {
      f.base = Fault::Base::kPrevious;
      if (!parseDuration(t.substr(1), &f.at_s)) return *error = "bad time '" + t + "' (e.g. '+2s', '+500ms')", false;
    } else if (!parseDuration(t, &f.at_s)) {
      return *error = "bad time '" + t + "' (e.g. '5s', '1500ms', 'phase+1s', '+2s')", false;
    }
    if (!(in >> word)) return *error = "expected a fault after 'at " + t + "'", false;
  } else if (scheduled) {
    return *error = "a scheduled fault starts with 'at TIME' (e.g. 'at 5s down 2 for 3s')", false;
  }
  std::string rest;
  if (word == "down") {
    f.kind = Fault::Kind::kDown;
    if (!pairsOf(topo, in, true, &f.pairs, &rest, error) || !tail(rest, true, false, &f, error)) return false;
  } else if (word == "burst") {
    f.kind = Fault::Kind::kBurst;
    if (!pairsOf(topo, in, false, &f.pairs, &rest, error) || !tail(rest, true, true, &f, error)) return false;
  } else if (word == "reset" || word == "forget") {
    f.kind = word == "reset" ? Fault::Kind::kReset : Fault::Kind::kForget;
    if (!pairsOf(topo, in, false, &f.pairs, &rest, error) || !tail(rest, false, false, &f, error)) return false;
  } else if (word == "path") {
    f.kind = Fault::Kind::kPath;
    std::getline(in, rest);
    f.path_line = "path" + rest;
    Topology scratch;
    if (!check(f.path_line, &scratch, error)) return false;
  } else {
    return *error = "unknown fault '" + word + "' (down, burst, reset, forget, path)", false;
  }
  *out = std::move(f);
  return true;
}

bool parseFaultsFile(std::istream& in, const std::string& name, const Topology& topo, const PathCheck& check,
                     std::vector<Fault>* out, std::string* error) {
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    Fault f;
    if (parseFaultLine(line, true, topo, check, &f, error)) {
      out->push_back(std::move(f));
    } else if (!error->empty()) {
      return *error = name + ":" + std::to_string(n) + ": " + *error + " (in '" + line + "')", false;
    }
  }
  return true;
}

}  // namespace pccl::wanem
