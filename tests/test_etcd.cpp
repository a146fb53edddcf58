// master/etcd_client against a real etcd on loopback (etcd_support.hpp; skipped with a warning when no
// etcd binary is installed): leases, get, compare-and-set transactions, gateway errors. The layers it
// stands on have their own tests: test_json.cpp (util/json, base64), test_http_client.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "etcd_support.hpp"
#include "master/etcd_client.hpp"
#include "master/http_client.hpp"
#include "test_support.hpp"
#include "util/clock.hpp"
#include "util/json.hpp"

using namespace pccl;
using namespace pccl::test;
using pccl::master::EtcdClient;
using pccl::master::HttpClient;

TEST_CASE("etcd: lease grant, keepalive and revoke, a leased key goes with its lease", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  auto lease = c.grantLease(30);
  REQUIRE(lease.isOk());
  CHECK(*lease > 0);
  auto ttl = c.keepAlive(*lease);
  REQUIRE(ttl.isOk());
  CHECK(*ttl > 0);
  CHECK(*ttl <= 30);
  auto put = c.putIfAbsent("/pccl/leader", "master-a", *lease);
  REQUIRE(put.isOk());
  CHECK(put->succeeded);
  auto got = c.get("/pccl/leader");
  REQUIRE(got.isOk());
  REQUIRE(got->has_value());
  CHECK((*got)->value == "master-a");
  CHECK((*got)->lease == *lease);
  CHECK(c.revokeLease(*lease).isOk());
  auto gone = c.keepAlive(*lease);
  REQUIRE(gone.isOk());
  CHECK(*gone == 0);
  got = c.get("/pccl/leader");
  REQUIRE(got.isOk());
  CHECK_FALSE(got->has_value());
  CHECK(c.revokeLease(*lease).isOk());  // etcd answers 404 "lease not found": not an error here
  auto stale = c.putIfAbsent("/pccl/leader", "master-a", *lease);  // a put on a lease that is gone
  REQUIRE_FALSE(stale.isOk());
  CHECK(stale.status().code() == Code::kSystemError);
  CHECK_THAT(stale.status().message(), Catch::Contains("HTTP 404") && Catch::Contains("requested lease not found"));
  auto bad = c.keepAlive(0);
  REQUIRE_FALSE(bad.isOk());
  CHECK(bad.status().code() == Code::kInvalidArgument);
}

TEST_CASE("etcd: putIfAbsent twice, the second fails and names the holder", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  auto first = c.putIfAbsent("/pccl/leader", "master-a", 0);
  REQUIRE(first.isOk());
  CHECK(first->succeeded);
  CHECK_FALSE(first->current.has_value());
  CHECK(first->revision > 1);
  CHECK(c.lastRevision() == first->revision);
  auto second = c.putIfAbsent("/pccl/leader", "master-b", 0);
  REQUIRE(second.isOk());
  CHECK_FALSE(second->succeeded);
  CHECK(second->revision == first->revision);
  REQUIRE(second->current.has_value());
  CHECK(second->current->key == "/pccl/leader");
  CHECK(second->current->value == "master-a");
  CHECK(second->current->create_revision == first->revision);
  CHECK(second->current->mod_revision == first->revision);
  CHECK(second->current->version == 1);
  CHECK(second->current->lease == 0);
  auto empty = c.get("");
  REQUIRE_FALSE(empty.isOk());
  CHECK(empty.status().code() == Code::kInvalidArgument);
}

TEST_CASE("etcd: putIfModRevision and deleteIfModRevision compare and set", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  const std::string key = "/pccl/cas";
  auto created = c.putIfModRevision(key, "a", 0, 0);  // 0: only if absent
  REQUIRE(created.isOk());
  REQUIRE(created->succeeded);
  const int64_t rev1 = created->revision;
  auto moved = c.putIfModRevision(key, "b", rev1, 0);
  REQUIRE(moved.isOk());
  CHECK(moved->succeeded);
  const int64_t rev2 = moved->revision;
  CHECK(rev2 > rev1);
  auto stale = c.putIfModRevision(key, "c", rev1, 0);
  REQUIRE(stale.isOk());
  CHECK_FALSE(stale->succeeded);
  REQUIRE(stale->current.has_value());
  CHECK(stale->current->value == "b");
  CHECK(stale->current->mod_revision == rev2);
  CHECK(stale->current->create_revision == rev1);
  CHECK(stale->current->version == 2);
  auto exists = c.putIfModRevision(key, "c", 0, 0);
  REQUIRE(exists.isOk());
  CHECK_FALSE(exists->succeeded);
  auto stale_delete = c.deleteIfModRevision(key, rev1);
  REQUIRE(stale_delete.isOk());
  CHECK_FALSE(stale_delete->succeeded);
  REQUIRE(stale_delete->current.has_value());
  CHECK(stale_delete->current->value == "b");
  auto deleted = c.deleteIfModRevision(key, rev2);
  REQUIRE(deleted.isOk());
  CHECK(deleted->succeeded);
  auto got = c.get(key);
  REQUIRE(got.isOk());
  CHECK_FALSE(got->has_value());
  auto absent = c.putIfModRevision(key, "d", rev2, 0);  // the key is gone: fails, nobody holds it
  REQUIRE(absent.isOk());
  CHECK_FALSE(absent->succeeded);
  CHECK_FALSE(absent->current.has_value());
  // Arbitrary bytes in keys and values (base64 on the wire); an empty value comes back empty.
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  const std::string binary_key = std::string("\0\xff/k", 4);
  auto put = c.putIfAbsent(binary_key, bytes, 0);
  REQUIRE(put.isOk());
  CHECK(put->succeeded);
  auto back = c.get(binary_key);
  REQUIRE(back.isOk());
  REQUIRE(back->has_value());
  CHECK((*back)->key == binary_key);
  CHECK((*back)->value == bytes);
  auto empty = c.putIfAbsent("/pccl/empty", "", 0);
  REQUIRE(empty.isOk());
  auto empty_back = c.get("/pccl/empty");
  REQUIRE(empty_back.isOk());
  REQUIRE(empty_back->has_value());
  CHECK((*empty_back)->value.empty());
}

TEST_CASE("etcd: a lease that is not kept alive expires and takes its key", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  auto lease = c.grantLease(1);  // etcd raises it to its minimum TTL (2 s with the default timings)
  REQUIRE(lease.isOk());
  auto put = c.putIfAbsent("/pccl/leader", "master-a", *lease);
  REQUIRE(put.isOk());
  REQUIRE(put->succeeded);
  const auto start = Clock::now();
  bool gone = false;
  std::string last_error;  // a get that failed on a starved machine (etcd's own deadline): asked again
  while (!gone && secondsSince(start) < 30.0) {
    auto got = c.get("/pccl/leader");
    if (got.isOk()) {
      gone = !got->has_value();
    } else {
      last_error = got.status().toString();
    }
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO("last failed get: " << last_error);
  CHECK(gone);
  auto ttl = c.keepAlive(*lease);
  REQUIRE(ttl.isOk());
  CHECK(*ttl == 0);
  // Someone else may take the key now.
  auto next = c.putIfAbsent("/pccl/leader", "master-b", 0);
  REQUIRE(next.isOk());
  CHECK(next->succeeded);
}

TEST_CASE("etcd: gateway errors come back as SystemError naming the endpoint", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  auto http = HttpClient::create(f->server->url(), "etcd");
  REQUIRE(http.isOk());
  auto missing = (*http)->post("/v3/no/such/path", "{}", Millis(5000));
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.status().code() == Code::kSystemError);
  CHECK_THAT(missing.status().message(), Catch::Contains("etcd " + f->server->url() + " answered HTTP 404"));
  auto bad_key = (*http)->post("/v3/kv/range", "{\"key\":\"!!\"}", Millis(5000));
  REQUIRE_FALSE(bad_key.isOk());
  CHECK_THAT(bad_key.status().message(), Catch::Contains("answered HTTP 400") && Catch::Contains("base64"));
  // The client's connection survives error answers: the same one serves the next call.
  auto fine = (*http)->post("/v3/kv/range", "{\"key\":\"Zm9v\"}", Millis(5000));
  REQUIRE(fine.isOk());
  auto answer = json::parse(fine->body);
  REQUIRE(answer.isOk());
  CHECK(answer->find("header") != nullptr);
}
