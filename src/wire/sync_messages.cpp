#include "wire/sync_messages.hpp"

#include <fmt/format.h>

namespace pccl::wire {

namespace {
// Smallest encodings, for ByteReader::count: a key with an empty name, a fetch with no source.
constexpr size_t kMinKeyBytes = 2 + 1 + 8 + 32;
constexpr size_t kMinFetchBytes = 4 + 32 + 4;
}  // namespace

void SyncAnnounce::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u64(revision);
  w.u8(strategy);
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const SyncKey& k : keys) {
    w.str(k.name);
    w.u8(k.dtype);
    w.u64(k.count);
    w.fixed(k.digest);
  }
}

Result<SyncAnnounce> SyncAnnounce::decode(ByteReader& r) {
  SyncAnnounce m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u64(&m.revision));
  PCCL_RETURN_IF_ERROR(r.u8(&m.strategy));
  if (!isValidSyncStrategy(m.strategy)) return Status::protocol(fmt::format("unknown sync strategy {}", m.strategy));
  uint32_t n = 0;
  PCCL_RETURN_IF_ERROR(r.count(&n, kMinKeyBytes));
  if (n > kMaxSyncKeys) return Status::protocol(fmt::format("{} shared-state keys, at most {}", n, kMaxSyncKeys));
  m.keys.resize(n);
  for (SyncKey& k : m.keys) {
    PCCL_RETURN_IF_ERROR(r.str(&k.name, kMaxSyncKeyName));
    PCCL_RETURN_IF_ERROR(r.u8(&k.dtype));
    PCCL_RETURN_IF_ERROR(r.u64(&k.count));
    PCCL_RETURN_IF_ERROR(r.fixed(&k.digest));
  }
  return m;
}

void SyncPlan::encode(ByteWriter& w) const {
  w.u64(sync_id);
  w.u16(code);
  w.str(reason);
  w.u64(revision);
  w.u32(static_cast<uint32_t>(fetches.size()));
  for (const SyncFetch& f : fetches) {
    w.u32(f.key);
    w.fixed(f.digest);
    w.u32(static_cast<uint32_t>(f.sources.size()));
    for (const Uuid& id : f.sources) w.fixed(id);
  }
}

Result<SyncPlan> SyncPlan::decode(ByteReader& r) {
  SyncPlan m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.sync_id));
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.reason));
  PCCL_RETURN_IF_ERROR(r.u64(&m.revision));
  uint32_t n = 0;
  PCCL_RETURN_IF_ERROR(r.count(&n, kMinFetchBytes));
  if (n > kMaxSyncKeys) return Status::protocol(fmt::format("{} keys to fetch, at most {}", n, kMaxSyncKeys));
  m.fetches.resize(n);
  for (SyncFetch& f : m.fetches) {
    PCCL_RETURN_IF_ERROR(r.u32(&f.key));
    PCCL_RETURN_IF_ERROR(r.fixed(&f.digest));
    uint32_t sources = 0;
    PCCL_RETURN_IF_ERROR(r.count(&sources, 16));
    if (sources == 0 || sources > kMaxSyncSources) {
      return Status::protocol(fmt::format("key {} to fetch from {} peers (1..{})", f.key, sources, kMaxSyncSources));
    }
    f.sources.resize(sources);
    for (Uuid& id : f.sources) PCCL_RETURN_IF_ERROR(r.fixed(&id));
  }
  return m;
}

}  // namespace pccl::wire
