#include "master/run_recovery.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "net/auth.hpp"

namespace pccl::master {

using wire::shortId;

namespace {
// Version 2 adds a "member <id> <ring key>" line per member; version 1 files (no keys) are still read.
constexpr const char* kRecordHeader = "pccl-run 2";
constexpr const char* kRecordHeaderV1 = "pccl-run 1";

}  // namespace

namespace {
// `n` bytes as 2n lowercase hex digits, and back (false: not exactly that).
std::string hexOf(const uint8_t* bytes, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", bytes[i]);
  return s;
}

bool parseHex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    for (size_t j = 0; j < 2; ++j) {
      const char c = s[2 * i + j];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<unsigned>(d);
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}
}  // namespace

std::string uuidHex(const wire::Uuid& id) { return hexOf(id.data(), id.size()); }
bool parseUuidHex(const std::string& s, wire::Uuid* id) { return parseHex(s, id->data(), id->size()); }
std::string signKeyHex(const wire::SignKey& k) { return hexOf(k.data(), k.size()); }
bool parseSignKeyHex(const std::string& s, wire::SignKey* k) { return parseHex(s, k->data(), k->size()); }

Result<std::optional<RunRecord>> readRunRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<RunRecord>();
    return Status::systemError(fmt::format("cannot read the master's state file '{}': {}", path, std::strerror(errno)));
  }
  std::string header, key1, id, key2, key3;
  RunRecord r;
  std::getline(in, header);
  const auto bad = [&](const std::string& what) -> Status {
    return Status::invalidArgument(fmt::format(
        "the master's state file '{}' is not a pccl run record ({}; expected '{}', run_id, term, epoch and member "
        "lines): remove it to start a new run",
        path, what, kRecordHeader));
  };
  if ((header != kRecordHeader && header != kRecordHeaderV1) || !(in >> key1 >> id >> key2 >> r.term >> key3 >> r.epoch) ||
      key1 != "run_id" || key2 != "term" || key3 != "epoch" || !parseUuidHex(id, &r.run_id)) {
    return bad("header, run_id, term or epoch");
  }
  if (r.term >= kMaxTerm) return bad(fmt::format("term {} out of range", r.term));
  std::string word, member, key;
  while (in >> word) {
    wire::Uuid mid{};
    wire::SignKey mk{};
    if (word != "member" || !(in >> member >> key) || !parseUuidHex(member, &mid) || !parseSignKeyHex(key, &mk) ||
        r.keys.size() >= kMaxRecordMembers) {
      return bad("a bad member line");
    }
    r.keys[mid] = mk;
  }
  return std::optional<RunRecord>(r);
}

// fsyncs the directory holding `path`, so that a rename into it survives a power loss (a file's own
// fsync does not make its directory entry durable).
static Status syncParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::systemError(fmt::format("cannot open the state file's directory '{}': {}", dir, std::strerror(errno)));
  // EINVAL: a file system that cannot sync directories (nothing more to do there).
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;
  const int err = errno;
  ::close(fd);
  if (!ok) return Status::systemError(fmt::format("cannot sync the state file's directory '{}': {}", dir, std::strerror(err)));
  return Status::ok();
}

Status writeRunRecord(const std::string& path, const RunRecord& r) {
  const std::string tmp = path + ".tmp";
  std::string text =
      fmt::format("{}\nrun_id {}\nterm {}\nepoch {}\n", kRecordHeader, uuidHex(r.run_id), r.term, r.epoch);
  for (const auto& [id, key] : r.keys) text += fmt::format("member {} {}\n", uuidHex(id), signKeyHex(key));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::systemError(fmt::format("cannot write '{}': {}", tmp, std::strerror(errno)));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::systemError(fmt::format("cannot write the master's state file '{}': {}", path,
                                           std::strerror(ok ? errno : err)));
  }
  return syncParentDirectory(path);  // the rename itself durable: else a power loss may bring the old record back
}

const char* masterRoleName(MasterRole r) {
  switch (r) {
    case MasterRole::kLeader: return "leader";
    case MasterRole::kStandby: return "standby";
    case MasterRole::kRecovering: return "recovering";
    case MasterRole::kFollower: return "follower";
  }
  return "?";
}

RunRecovery::RunRecovery(bool standby, std::optional<RunRecord> stored, Millis window, TimePoint now)
    : role_(MasterRole::kLeader), window_(window) {
  if (stored) {
    // Restarted in place: the run's members are probably on their way back.
    run_ = *stored;
    ++run_.term;
    role_ = MasterRole::kRecovering;
    window_end_ = now + window_;
    ++changes_;
  } else if (standby) {
    role_ = MasterRole::kStandby;
  } else {
    run_.run_id = net::randomUuid();
    run_.term = 1;
    ++changes_;
  }
}

RunRecovery::Decision RunRecovery::decideRun(const wire::JoinRequest& m, size_t members) const {
  Decision d;
  if (m.resuming() && m.term >= kMaxTerm) {
    d.verdict = Verdict::kRefuse;
    d.code = Code::kInvalidUsage;
    d.reason = fmt::format("peer {} brings term {}, out of range (a run's terms stay below 2^62)", shortId(m.peer_id),
                           m.term);
    return d;
  }
  if (role_ == MasterRole::kFollower) {
    d.verdict = Verdict::kRefuse;
    d.code = Code::kMasterUnreachable;
    d.reason = leader_hint_.empty() ? std::string("this master does not lead the run (etcd elects another)")
                                    : "this master does not lead the run: " + leader_hint_ + " does (etcd)";
    return d;
  }
  if (!m.resuming()) {
    if (role_ == MasterRole::kStandby && (m.resume_flags & wire::JoinRequest::kAnyMaster) == 0) {
      d.verdict = Verdict::kRefuse;
      d.code = Code::kMasterUnreachable;
      d.reason = "this master is a standby: it leads no run until a member of one comes back to it (try the "
                 "run's other master addresses)";
    }
    return d;  // kJoin
  }
  if (etcd_ && (m.run_id != run_.run_id || m.term > run_.term)) {
    d.verdict = Verdict::kRefuse;
    d.code = Code::kMasterUnreachable;
    d.reason = fmt::format("this master leads run {} at term {} (elected through etcd); peer {} brings run {} at "
                           "term {}",
                           shortId(run_.run_id), run_.term, shortId(m.peer_id), shortId(m.run_id), m.term);
    return d;
  }
  if (members == 0 && role_ != MasterRole::kRecovering) {
    d.verdict = Verdict::kAdopt;  // nothing here to keep: the run it brings is the run
    return d;
  }
  if (members == 0 && run_.run_id != m.run_id) {
    d.verdict = Verdict::kAdopt;  // waiting for a run that another one overtook
    return d;
  }
  if (m.run_id != run_.run_id) {
    d.verdict = Verdict::kRefuse;
    d.code = Code::kMasterUnreachable;
    d.reason = fmt::format("this master leads run {} (term {}), not run {}", shortId(run_.run_id), run_.term,
                           shortId(m.run_id));
    return d;
  }
  if (m.term > run_.term) {
    d.verdict = Verdict::kSupersede;
    d.reason = fmt::format("peer {} followed a newer master of run {} (term {} > this master's {})",
                           shortId(m.peer_id), shortId(run_.run_id), m.term, run_.term);
    return d;
  }
  d.verdict = Verdict::kResume;
  return d;
}

RunRecovery::Decision RunRecovery::decide(const wire::JoinRequest& m, size_t members) const {
  Decision d = decideRun(m, members);
  // Taking a run over (and dropping what this master holds) needs a member of the run's ring: a peer
  // that never held one (a pending peer) is admitted like a newcomer, not trusted to name the run.
  const bool takes_over = d.verdict == Verdict::kAdopt || d.verdict == Verdict::kSupersede;
  if (takes_over && (m.epoch == 0 || m.ring.empty())) {
    d.verdict = Verdict::kRefuse;
    d.code = Code::kMasterUnreachable;
    d.reason = fmt::format("peer {} holds no ring of run {}: only a member of the run's ring can bring it to this "
                           "master (it waits for one, or tries the run's other master addresses)",
                           shortId(m.peer_id), shortId(m.run_id));
  }
  return d;
}

void RunRecovery::adopt(const wire::JoinRequest& m, TimePoint now) {
  if (m.run_id != run_.run_id) {  // another run: its epochs and members' keys come from its members
    run_.epoch = 0;
    run_.keys.clear();
  }
  run_.run_id = m.run_id;
  run_.term = std::max(run_.term, m.term) + 1;
  role_ = MasterRole::kRecovering;
  window_end_ = now + window_;
  epoch_ = 0;
  expected_.clear();
  returned_.clear();
  ++changes_;
}

Status RunRecovery::proveMember(const wire::JoinRequest& m) {
  auto it = run_.keys.find(m.peer_id);
  if (it != run_.keys.end()) {
    if (it->second == m.ring_key) return Status::ok();
    return Status::authFailed(fmt::format("a resume of member {} of run {} with a ring key that is not the member's: "
                                          "refused (only the member itself can come back as it)",
                                          shortId(m.peer_id), shortId(run_.run_id)));
  }
  if (role_ == MasterRole::kRecovering) {
    if (run_.keys.size() >= kMaxRecordMembers) {
      return Status::invalidUsage(fmt::format("run {} already knows {} members", shortId(run_.run_id), run_.keys.size()));
    }
    run_.keys[m.peer_id] = m.ring_key;  // pinned: the first proof for an id we did not know
    ++changes_;
  }
  return Status::ok();
}

void RunRecovery::setMembers(std::map<wire::Uuid, wire::SignKey> keys) {
  if (role_ == MasterRole::kRecovering) {
    for (auto& [id, key] : keys) {
      if (run_.keys.emplace(id, key).second) ++changes_;
    }
    return;
  }
  if (keys == run_.keys) return;
  run_.keys = std::move(keys);
  ++changes_;
}

void RunRecovery::noteReturn(const wire::MemberInfo& info, const wire::JoinRequest& m) {
  returned_[info.id] = Returned{info, m.epoch, (m.resume_flags & wire::JoinRequest::kRingUp) != 0};
  if (m.epoch > epoch_ || (m.epoch == epoch_ && expected_.empty())) {
    epoch_ = m.epoch;
    expected_ = m.ring;
  }
}

bool RunRecovery::due(TimePoint now) const {
  if (role_ != MasterRole::kRecovering) return false;
  if (now >= window_end_) return true;
  if (expected_.empty()) return false;
  return std::all_of(expected_.begin(), expected_.end(), [&](const wire::Uuid& id) { return returned_.count(id) != 0; });
}

RunRecovery::Rebuild RunRecovery::finish() {
  Rebuild r;
  r.epoch = std::max(epoch_, run_.epoch);
  std::vector<std::string> missing;
  std::vector<std::string> other;
  for (const wire::Uuid& id : expected_) {
    auto it = returned_.find(id);
    if (it == returned_.end()) {
      missing.push_back(shortId(id));
      continue;
    }
    r.ring.push_back(it->second.info);
    if (it->second.epoch != epoch_ || !it->second.ring_up) other.push_back(shortId(id));
  }
  for (const auto& [id, ret] : returned_) {
    if (std::find(expected_.begin(), expected_.end(), id) != expected_.end()) continue;
    r.ring.push_back(ret.info);
    other.push_back(shortId(id));
  }
  auto names = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  if (!missing.empty()) {
    r.stale = true;
    r.why = fmt::format("peer(s) {} of the ring of epoch {} did not come back to the new master within {} ms",
                        names(missing), epoch_, window_.count());
  }
  if (run_.epoch > epoch_ && !r.ring.empty()) {
    r.stale = true;
    r.why += fmt::format("{}the ring of epoch {} had been replaced by epoch {} (being built when the master stopped)",
                         r.why.empty() ? "" : "; ", epoch_, run_.epoch);
  }
  run_.epoch = r.epoch;
  if (!other.empty()) {
    r.stale = true;
    r.why += fmt::format("{}peer(s) {} came back without the ring of epoch {} installed", r.why.empty() ? "" : "; ",
                         names(other), epoch_);
  }
  role_ = MasterRole::kLeader;
  expected_.clear();
  returned_.clear();
  ++changes_;
  return r;
}

void RunRecovery::elect(const RunRecord& record, TimePoint now) {
  etcd_ = true;
  run_ = record;
  epoch_ = 0;
  expected_.clear();
  returned_.clear();
  if (record.run_id == wire::Uuid{}) {
    run_.run_id = net::randomUuid();
    role_ = MasterRole::kLeader;
  } else {
    role_ = MasterRole::kRecovering;
    window_end_ = now + window_;
  }
  ++changes_;
}

void RunRecovery::lead() {
  if (run_.term == 0) run_.run_id = net::randomUuid();
  ++run_.term;
  role_ = MasterRole::kLeader;
  ++changes_;
}

}  // namespace pccl::master
