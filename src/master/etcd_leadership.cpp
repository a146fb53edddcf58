#include "master/etcd_leadership.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "util/json.hpp"
#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";

int64_t ttlSeconds(Millis lease) { return std::max<int64_t>(2, (lease.count() + 999) / 1000); }
}  // namespace

std::string encodeEtcdRecord(const EtcdRecord& r) {
  json::Value members = json::Value::array();
  for (const wire::Uuid& id : r.members) members.push(json::Value::string(uuidHex(id)));
  json::Value keys = json::Value::object();  // the members' ring keys (resume proofs)
  for (const auto& [id, key] : r.run.keys) keys.set(uuidHex(id), json::Value::string(signKeyHex(key)));
  json::Value v = json::Value::object();
  v.set("run_id", json::Value::string(uuidHex(r.run.run_id)))
      .set("term", json::Value::integer(static_cast<int64_t>(r.run.term)))
      .set("epoch", json::Value::integer(static_cast<int64_t>(r.run.epoch)))
      .set("leader", json::Value::string(r.leader))
      .set("members", std::move(members))
      .set("keys", std::move(keys));
  return v.serialize();
}

Result<EtcdRecord> decodeEtcdRecord(const std::string& text) {
  PCCL_ASSIGN_OR_RETURN(json::Value v, json::parse(text));
  auto bad = [&](const char* what) {
    return Status::protocol(fmt::format("the run's record in etcd is not pccl's ({}): {}", what,
                                        text.substr(0, std::min<size_t>(text.size(), 200))));
  };
  if (!v.isObject()) return bad("not an object");
  EtcdRecord r;
  const json::Value* id = v.find("run_id");
  const json::Value* term = v.find("term");
  const json::Value* epoch = v.find("epoch");
  if (id == nullptr || !id->isString() || !parseUuidHex(id->asString(), &r.run.run_id)) return bad("run_id");
  if (term == nullptr || !term->asInt64() || *term->asInt64() < 0) return bad("term");
  if (epoch == nullptr || !epoch->asInt64() || *epoch->asInt64() < 0) return bad("epoch");
  r.run.term = static_cast<uint64_t>(*term->asInt64());
  if (r.run.term >= kMaxTerm) return bad("term out of range");
  r.run.epoch = static_cast<uint64_t>(*epoch->asInt64());
  if (const json::Value* l = v.find("leader"); l != nullptr && l->isString()) r.leader = l->asString();
  if (const json::Value* m = v.find("members"); m != nullptr && m->isArray()) {
    for (size_t i = 0; i < m->size(); ++i) {
      wire::Uuid u{};
      if (!m->at(i).isString() || !parseUuidHex(m->at(i).asString(), &u)) return bad("members");
      r.members.push_back(u);
    }
  }
  if (const json::Value* k = v.find("keys"); k != nullptr) {
    if (!k->isObject() || k->size() > kMaxRecordMembers) return bad("keys");
    for (size_t i = 0; i < k->size(); ++i) {
      wire::Uuid u{};
      wire::SignKey key{};
      if (!parseUuidHex(k->keyAt(i), &u) || !k->valueAt(i).isString() || !parseSignKeyHex(k->valueAt(i).asString(), &key)) {
        return bad("keys");
      }
      r.run.keys[u] = key;
    }
  }
  return r;
}

EtcdLeadership::EtcdLeadership(asio::io_context& io, EtcdConfig config, Callbacks callbacks)
    : io_(io),
      config_(std::move(config)),
      callbacks_(std::move(callbacks)),
      ttl_(Millis(1000 * ttlSeconds(config_.lease))),
      timer_(io) {}

EtcdLeadership::~EtcdLeadership() {
  stop();
  *alive_ = false;
}

Status EtcdLeadership::start() {
  // Two keepalives fit between one answered keepalive and the local deadline (three quarters of a TTL).
  const Millis timeout = std::clamp(ttl_ / 4, Millis(300), Millis(5000));
  PCCL_ASSIGN_OR_RETURN(client_, EtcdClient::create(config_.url, timeout));
  PCCL_LOG_INFO(kLog, "etcd {}: campaigning for {}/leader as {} (lease {} s; a leader acts until {} ms before etcd "
                "can expire it)",
                config_.url, config_.prefix, config_.name, ttl_.count() / 1000, deadlineMargin(ttl_).count());
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void EtcdLeadership::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    leading_ = false;  // no on_lost after stop(): the master is going away
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EtcdLeadership::publish(const EtcdRecord& record) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    to_publish_ = record;
  }
  cv_.notify_all();
}

bool EtcdLeadership::sleepFor(Millis d, bool while_leading) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, d, [&] { return stopping_ || to_publish_.has_value() || (while_leading && !leading_); });
  return !stopping_;
}

void EtcdLeadership::post(std::function<void()> fn) {
  asio::post(io_, [alive = alive_, fn = std::move(fn)] {
    if (*alive) fn();
  });
}

// ---- the tenure and its local deadline ----

uint64_t EtcdLeadership::beginTenure(TimePoint deadline) {
  std::lock_guard<std::mutex> lk(mu_);
  leading_ = !stopping_;
  deadline_ = deadline;
  return ++tenure_;
}

void EtcdLeadership::extendTenure(TimePoint deadline) {
  std::lock_guard<std::mutex> lk(mu_);
  if (leading_) deadline_ = std::max(deadline_, deadline);
}

bool EtcdLeadership::tenureValid() {
  std::lock_guard<std::mutex> lk(mu_);
  return leading_ && Clock::now() < deadline_;
}

void EtcdLeadership::endTenure(const Status& why) {
  uint64_t t = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!leading_) return;  // the timer ended it first (or stop())
    leading_ = false;
    t = tenure_;
  }
  post([this, t, why] { deliverLost(t, why); });
}

void EtcdLeadership::deliverElected(uint64_t t, const EtcdRecord& record) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (tenure_ != t || !leading_) return;  // over before it reached the master: nothing to undo
  }
  acting_ = t;
  if (callbacks_.on_elected) callbacks_.on_elected(record);
  armTimer();
}

void EtcdLeadership::deliverLost(uint64_t t, const Status& why) {
  if (acting_ != t) return;
  acting_ = 0;
  timer_.cancel();
  if (callbacks_.on_lost) callbacks_.on_lost(why);
}

void EtcdLeadership::armTimer() {
  TimePoint at;
  {
    std::lock_guard<std::mutex> lk(mu_);
    at = deadline_;
  }
  timer_.expires_at(at);
  timer_.async_wait([this, alive = alive_](const asio::error_code& ec) {
    if (!ec && *alive) onTimer();
  });
}

void EtcdLeadership::onTimer() {
  if (acting_ == 0) return;
  const uint64_t t = acting_;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (tenure_ != t || !leading_) return;  // the thread ended it: its on_lost is on its way
    if (Clock::now() < deadline_) {         // a keepalive moved the deadline meanwhile
      timer_.expires_at(deadline_);
      timer_.async_wait([this, alive = alive_](const asio::error_code& ec) {
        if (!ec && *alive) onTimer();
      });
      return;
    }
    leading_ = false;
  }
  cv_.notify_all();  // the thread resigns as soon as its call in flight returns
  deliverLost(t, Status::masterUnreachable(fmt::format(
                     "etcd did not renew the leader's lease in time: stopping at the local deadline, {} ms before "
                     "etcd can expire the lease and elect another master",
                     deadlineMargin(ttl_).count())));
}

bool EtcdLeadership::overdue() {
  if (acting_ == 0) return false;
  bool over = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    over = tenure_ != acting_ || !leading_ || Clock::now() >= deadline_;
  }
  if (over) post([this] { onTimer(); });  // the step-down at once, not after what is queued before the timer
  return over;
}

// ---- the thread ----

void EtcdLeadership::run() {
  while (sleepFor(Millis(0))) {
    TimePoint granted;
    if (campaign(&granted)) {
      lead(granted);
    } else {
      sleepFor(config_.lease / 3);
    }
  }
  if (lease_ != 0) (void)client_->revokeLease(lease_);  // resign: a follower takes over at once
  lease_ = 0;
}

bool EtcdLeadership::campaign(TimePoint* granted_at) {
  const std::string leader_key = config_.prefix + "/leader";
  const std::string record_key = config_.prefix + "/record";
  auto resign = [&] {
    if (lease_ != 0) (void)client_->revokeLease(lease_);
    lease_ = 0;
  };
  *granted_at = Clock::now();  // etcd starts the lease's TTL no sooner than it receives this request
  auto granted = client_->grantLease(ttlSeconds(config_.lease));
  if (!granted.isOk()) {
    PCCL_LOG_DEBUG(kLog, "etcd: cannot campaign: {}", granted.status().toString());
    return false;
  }
  lease_ = *granted;
  auto put = client_->putIfAbsent(leader_key, config_.name, lease_);
  if (!put.isOk() || !put->succeeded) {
    const std::string holder = put.isOk() && put->current ? put->current->value : std::string();
    if (holder != seen_leader_) {
      seen_leader_ = holder;
      post([this, holder] {
        if (callbacks_.on_leader) callbacks_.on_leader(holder);
      });
    }
    resign();
    return false;
  }
  // Elected: the run's record takes this master's term (compare-and-set on its revision).
  auto kv = client_->get(record_key);
  EtcdRecord rec;
  int64_t rev = 0;
  if (kv.isOk() && *kv) {
    auto decoded = decodeEtcdRecord((*kv)->value);
    if (!decoded.isOk()) {
      PCCL_LOG_ERROR(kLog, "etcd: {}", decoded.status().toString());
      resign();
      return false;
    }
    rec = *decoded;
    rev = (*kv)->mod_revision;
  }
  if (!kv.isOk()) {
    resign();
    return false;
  }
  ++rec.run.term;
  const std::string before = rec.leader;
  rec.leader = config_.name;
  auto wrote = client_->putIfModRevision(record_key, encodeEtcdRecord(rec), rev, 0);
  if (!wrote.isOk() || !wrote->succeeded) {
    resign();
    return false;
  }
  record_rev_ = wrote->revision;
  term_ = rec.run.term;
  seen_leader_ = config_.name;
  rec.leader = before;  // the callback hears who led before
  const uint64_t t = beginTenure(*granted_at + ttl_ - deadlineMargin(ttl_));
  post([this, t, rec] { deliverElected(t, rec); });
  return true;
}

void EtcdLeadership::lead(TimePoint granted) {
  const Millis interval = ttl_ / 4;
  TimePoint last_keepalive = granted;
  Status lost;
  while (lost.isOk() &&
         sleepFor(interval - std::min(interval, std::chrono::duration_cast<Millis>(Clock::now() - last_keepalive)),
                  true)) {
    if (!tenureValid()) break;  // past the local deadline: the io thread's timer steps down
    std::optional<EtcdRecord> rec;
    {
      std::lock_guard<std::mutex> lk(mu_);
      rec.swap(to_publish_);
    }
    if (rec) {
      bool again = false;
      lost = writeRecord(*rec, &again);
      if (!lost.isOk()) break;
      if (again) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!to_publish_) to_publish_ = rec;  // again with the next keepalive
      }
    }
    if (Clock::now() - last_keepalive < interval) continue;
    // The lease lives at least until this request reaches etcd plus the TTL: the deadline counts from
    // the sending, never from the answer.
    const TimePoint sent = Clock::now();
    last_keepalive = sent;
    auto ttl = client_->keepAlive(lease_);
    if (ttl.isOk() && *ttl > 0) {
      const Millis granted_ttl = std::min(ttl_, Millis(1000 * *ttl));
      extendTenure(sent + granted_ttl - deadlineMargin(granted_ttl));
    } else if (ttl.isOk()) {
      lost = Status::masterUnreachable(
          "the leader's etcd lease expired (this master was frozen, or cut off from etcd, for longer than the lease)");
    } else {
      PCCL_LOG_DEBUG(kLog, "etcd: keepalive failed: {}", ttl.status().toString());
    }
  }
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopped = stopping_;
  }
  if (stopped) return;  // stop(): run() resigns
  if (lost.isOk()) lost = Status::masterUnreachable("etcd did not renew the leader's lease before the local deadline");
  PCCL_LOG_WARN(kLog, "etcd: {}", lost.message());
  endTenure(lost);  // nothing when the timer ended the tenure first
  (void)client_->revokeLease(lease_);
  lease_ = 0;
  seen_leader_.clear();
}

Status EtcdLeadership::writeRecord(const EtcdRecord& record, bool* again) {
  const std::string key = config_.prefix + "/record";
  EtcdRecord mine = record;
  mine.leader = config_.name;
  const std::string text = encodeEtcdRecord(mine);
  *again = false;
  int64_t adopted = 0;
  for (;;) {
    auto w = client_->putIfModRevision(key, text, record_rev_, 0);
    if (!w.isOk()) {
      PCCL_LOG_DEBUG(kLog, "etcd: writing the run's record: {}", w.status().toString());
      *again = true;
      return Status::ok();
    }
    if (w->succeeded) {
      record_rev_ = w->revision;
      if (adopted != 0) {
        PCCL_LOG_INFO(kLog, "etcd: a write of the run's record went through but its answer was lost (revision {} "
                      "holds this master's own record of term {}): adopted that revision; written again at revision {}",
                      adopted, term_, w->revision);
      }
      return Status::ok();
    }
    // The record moved since our last write. If it is our own (our name, our term), an earlier write
    // went through and its answer was lost (or the HTTP client's retry on a fresh connection found its
    // first try applied): nobody else writes our term, so its revision is ours. Once only: a compare
    // that fails again is another master's doing.
    if (adopted == 0 && w->current && isOwnRecord(*w->current)) {
      adopted = w->current->mod_revision;
      record_rev_ = adopted;
      continue;
    }
    return Status::masterUnreachable(fmt::format(
        "the run's record in etcd was written by another master ({}): this one no longer leads",
        w->current ? w->current->value.substr(0, 120) : std::string("deleted")));
  }
}

bool EtcdLeadership::isOwnRecord(const EtcdClient::KeyValue& kv) const {
  auto decoded = decodeEtcdRecord(kv.value);
  return decoded.isOk() && decoded->leader == config_.name && decoded->run.term == term_;
}

}  // namespace pccl::master
