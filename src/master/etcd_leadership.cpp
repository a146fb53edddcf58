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
    : io_(io), config_(std::move(config)), callbacks_(std::move(callbacks)) {}

EtcdLeadership::~EtcdLeadership() {
  stop();
  *alive_ = false;
}

Status EtcdLeadership::start() {
  const Millis timeout = std::clamp(config_.lease / 3, Millis(300), Millis(5000));
  PCCL_ASSIGN_OR_RETURN(client_, EtcdClient::create(config_.url, timeout));
  PCCL_LOG_INFO(kLog, "etcd {}: campaigning for {}/leader as {} (lease {} s)", config_.url, config_.prefix,
                config_.name, ttlSeconds(config_.lease));
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void EtcdLeadership::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
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

bool EtcdLeadership::sleepFor(Millis d) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, d, [&] { return stopping_ || to_publish_.has_value(); });
  return !stopping_;
}

void EtcdLeadership::post(std::function<void()> fn) {
  asio::post(io_, [alive = alive_, fn = std::move(fn)] {
    if (*alive) fn();
  });
}

void EtcdLeadership::run() {
  while (sleepFor(Millis(0))) {
    if (campaign()) {
      lead();
    } else {
      sleepFor(config_.lease / 3);
    }
  }
  if (lease_ != 0) (void)client_->revokeLease(lease_);  // resign: a follower takes over at once
  lease_ = 0;
}

bool EtcdLeadership::campaign() {
  const std::string leader_key = config_.prefix + "/leader";
  const std::string record_key = config_.prefix + "/record";
  auto resign = [&] {
    if (lease_ != 0) (void)client_->revokeLease(lease_);
    lease_ = 0;
  };
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
  seen_leader_ = config_.name;
  rec.leader = before;  // the callback hears who led before
  post([this, rec] {
    if (callbacks_.on_elected) callbacks_.on_elected(rec);
  });
  return true;
}

void EtcdLeadership::lead() {
  const std::string record_key = config_.prefix + "/record";
  TimePoint last_ok = Clock::now();
  TimePoint last_keepalive = Clock::now();
  Status lost;
  while (lost.isOk() && sleepFor(config_.lease / 3 - std::min(config_.lease / 3, std::chrono::duration_cast<Millis>(
                                                                                     Clock::now() - last_keepalive)))) {
    std::optional<EtcdRecord> rec;
    {
      std::lock_guard<std::mutex> lk(mu_);
      rec.swap(to_publish_);
    }
    if (rec) {
      rec->leader = config_.name;
      auto w = client_->putIfModRevision(record_key, encodeEtcdRecord(*rec), record_rev_, 0);
      if (w.isOk() && w->succeeded) {
        record_rev_ = w->revision;
        last_ok = Clock::now();
      } else if (w.isOk()) {
        lost = Status::masterUnreachable(fmt::format(
            "the run's record in etcd was written by another master ({}): this one no longer leads",
            w->current ? w->current->value.substr(0, 120) : std::string("deleted")));
        break;
      } else {
        std::lock_guard<std::mutex> lk(mu_);
        if (!to_publish_) to_publish_ = rec;  // again with the next keepalive
      }
    }
    if (Clock::now() - last_keepalive < config_.lease / 3) continue;
    last_keepalive = Clock::now();
    auto ttl = client_->keepAlive(lease_);
    if (ttl.isOk() && *ttl > 0) {
      last_ok = Clock::now();
    } else if (ttl.isOk()) {
      lost = Status::masterUnreachable(
          "the leader's etcd lease expired (this master was frozen, or cut off from etcd, for longer than the lease)");
    } else if (Clock::now() - last_ok > config_.lease) {
      lost = Status::masterUnreachable(fmt::format("etcd did not answer for a whole lease: {}", ttl.status().message()));
    }
  }
  if (lost.isOk()) return;  // stop(): run() resigns
  PCCL_LOG_WARN(kLog, "etcd: {}", lost.message());
  (void)client_->revokeLease(lease_);
  lease_ = 0;
  seen_leader_.clear();
  post([this, lost] {
    if (callbacks_.on_lost) callbacks_.on_lost(lost);
  });
}

}  // namespace pccl::master
