// A small etcd v3 client over etcd's JSON gateway (HTTP/1.1, the /v3/... paths of etcd 3.4): leases,
// reads of one key, and the compare-and-set transactions a leader election needs. Keys and values
// are byte strings (base64 on the wire). The gateway writes int64 fields as JSON strings and leaves out
// zero values (a false "succeeded", a zero "lease", an empty "value"); both spellings of field names
// (create_revision and createRevision) are accepted.
// Thread: thread-compatible (one call at a time); every call blocks for at most the request timeout.
#ifndef PCCL_MASTER_ETCD_CLIENT_HPP_
#define PCCL_MASTER_ETCD_CLIENT_HPP_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "master/http_client.hpp"
#include "pccl/status.hpp"
#include "util/clock.hpp"
#include "util/json.hpp"

namespace pccl::master {

class EtcdClient {
 public:
  struct KeyValue {
    std::string key;
    std::string value;
    int64_t create_revision = 0;
    int64_t mod_revision = 0;
    int64_t version = 0;
    int64_t lease = 0;  // 0: none
  };

  struct TxnResult {
    bool succeeded = false;
    // The failure branch's read of the key (who holds it); nullopt when the compare succeeded or the
    // key does not exist.
    std::optional<KeyValue> current;
    int64_t revision = 0;  // the store's revision after the transaction (response header)
  };

  // `url`: "http://HOST:PORT" (InvalidArgument otherwise, https included). Connects lazily.
  static Result<std::unique_ptr<EtcdClient>> create(const std::string& url, Millis request_timeout);

  // A lease of `ttl_s` seconds (etcd may round it up to its minimum); returns its id.
  Result<int64_t> grantLease(int64_t ttl_s);
  // Refreshes the lease; returns its TTL in seconds, 0 when the lease no longer exists (expired or
  // revoked).
  Result<int64_t> keepAlive(int64_t lease);
  // Revokes the lease, deleting its keys. A lease already gone is not an error.
  Status revokeLease(int64_t lease);

  // The key's current value, nullopt when absent.
  Result<std::optional<KeyValue>> get(const std::string& key);

  // Puts the key if it does not exist (create_revision == 0), attached to `lease` (0: none).
  Result<TxnResult> putIfAbsent(const std::string& key, const std::string& value, int64_t lease);
  // Puts the key if its mod_revision is `mod_revision`; 0 means "if absent", as putIfAbsent.
  Result<TxnResult> putIfModRevision(const std::string& key, const std::string& value, int64_t mod_revision,
                                     int64_t lease);
  // Deletes the key if its mod_revision is `mod_revision` (0: if absent, which deletes nothing).
  Result<TxnResult> deleteIfModRevision(const std::string& key, int64_t mod_revision);

  // The response header's revision of the last successful call (0 before any).
  int64_t lastRevision() const { return last_revision_; }
  const std::string& url() const { return url_; }

 private:
  EtcdClient(std::unique_ptr<HttpClient> http, std::string url, Millis timeout);

  // POSTs `request` to `path`; the parsed answer (a stream's {"result": ...} unwrapped), its header
  // revision recorded. On an error answer, *grpc_code (when given) is etcd's gRPC code (5: not found).
  Result<json::Value> call(const char* path, const json::Value& request, int* grpc_code = nullptr);
  // Compare (the key's mod_revision, or create_revision == 0), then `success`, else a range of the key.
  Result<TxnResult> txn(const std::string& key, int64_t mod_revision, json::Value success);

  std::unique_ptr<HttpClient> http_;
  std::string url_;
  Millis timeout_;
  int64_t last_revision_ = 0;
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_ETCD_CLIENT_HPP_
