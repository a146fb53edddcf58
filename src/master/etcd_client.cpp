#include "master/etcd_client.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string_view>
#include <utility>

namespace pccl::master {

namespace {

constexpr int kGrpcNotFound = 5;

using json::Value;

// A member under either spelling the gateway may use (proto name or lowerCamelCase).
const Value* field(const Value& obj, std::string_view snake, std::string_view camel = {}) {
  const Value* v = obj.find(snake);
  if (v == nullptr && !camel.empty()) v = obj.find(camel);
  return v;
}

// An int64 field: a JSON string of digits (how the gateway writes int64) or a number; absent means 0.
Result<int64_t> int64Field(const Value& obj, std::string_view snake, std::string_view camel = {}) {
  const Value* v = field(obj, snake, camel);
  if (v == nullptr || v->isNull()) return int64_t{0};
  if (v->isNumber()) {
    if (auto n = v->asInt64()) return *n;
  } else if (v->isString()) {
    const std::string& s = v->asString();
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size()) return n;
  }
  return Status::protocol(fmt::format("field '{}' is not an int64: {:.60}", snake, v->serialize()));
}

// A bytes field (base64 in a JSON string); absent means empty.
Result<std::string> bytesField(const Value& obj, std::string_view name) {
  const Value* v = obj.find(name);
  if (v == nullptr || v->isNull()) return std::string();
  if (!v->isString()) return Status::protocol(fmt::format("field '{}' is not a base64 string", name));
  auto decoded = base64Decode(v->asString());
  if (!decoded.isOk()) return decoded.status().withContext(fmt::format("field '{}'", name));
  return decoded;
}

Result<EtcdClient::KeyValue> decodeKeyValue(const Value& kv) {
  if (!kv.isObject()) return Status::protocol("a key-value is not an object");
  EtcdClient::KeyValue out;
  PCCL_ASSIGN_OR_RETURN(out.key, bytesField(kv, "key"));
  PCCL_ASSIGN_OR_RETURN(out.value, bytesField(kv, "value"));
  PCCL_ASSIGN_OR_RETURN(out.create_revision, int64Field(kv, "create_revision", "createRevision"));
  PCCL_ASSIGN_OR_RETURN(out.mod_revision, int64Field(kv, "mod_revision", "modRevision"));
  PCCL_ASSIGN_OR_RETURN(out.version, int64Field(kv, "version"));
  PCCL_ASSIGN_OR_RETURN(out.lease, int64Field(kv, "lease"));
  return out;
}

// The first of a range response's "kvs", or nullopt when it has none.
Result<std::optional<EtcdClient::KeyValue>> firstKeyValue(const Value& range) {
  const Value* kvs = range.find("kvs");
  if (kvs == nullptr || kvs->isNull() || (kvs->isArray() && kvs->size() == 0)) {
    return std::optional<EtcdClient::KeyValue>();
  }
  if (!kvs->isArray()) return Status::protocol("field 'kvs' is not an array");
  PCCL_ASSIGN_OR_RETURN(auto kv, decodeKeyValue(kvs->at(0)));
  return std::optional<EtcdClient::KeyValue>(std::move(kv));
}

Value int64Value(int64_t n) { return Value::string(std::to_string(n)); }  // as the gateway writes int64
Value bytesValue(const std::string& bytes) { return Value::string(base64Encode(bytes)); }

Value putRequest(const std::string& key, const std::string& value, int64_t lease) {
  Value put = Value::object();
  put.set("key", bytesValue(key)).set("value", bytesValue(value));
  if (lease != 0) put.set("lease", int64Value(lease));
  return Value::object().set("request_put", std::move(put));
}

Status checkKey(const std::string& key) {
  return key.empty() ? Status::invalidArgument("etcd: the key must not be empty") : Status::ok();
}

// An etcd error object: {"error":"...","message":"...","code":5} (unary calls) or
// {"error":{"grpc_code":5,"message":"..."}} (streams). Returns the message; *code the gRPC code.
std::string errorMessage(const Value& answer, int* code) {
  const Value* error = answer.find("error");
  const Value* holder = error != nullptr && error->isObject() ? error : &answer;
  const Value* c = field(*holder, "code");
  if (c == nullptr) c = field(*holder, "grpc_code", "grpcCode");
  if (c != nullptr && c->asInt64()) *code = static_cast<int>(*c->asInt64());
  const Value* message = holder->find("message");
  if (message != nullptr && message->isString()) return message->asString();
  if (error != nullptr && error->isString()) return error->asString();
  return error != nullptr ? error->serialize() : std::string();
}

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::create(const std::string& url, Millis request_timeout) {
  if (request_timeout.count() <= 0) return Status::invalidArgument("etcd: the request timeout must be positive");
  auto http = HttpClient::create(url, "etcd");
  if (!http.isOk()) return http.status();
  std::string canonical = (*http)->url().toString();
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(http).value(), std::move(canonical), request_timeout));
}

EtcdClient::EtcdClient(std::unique_ptr<HttpClient> http, std::string url, Millis timeout)
    : http_(std::move(http)), url_(std::move(url)), timeout_(timeout) {}

Result<Value> EtcdClient::call(const char* path, const Value& request, int* grpc_code) {
  PCCL_ASSIGN_OR_RETURN(HttpResponse response, http_->request(path, request.serialize(), timeout_));
  auto context = [&] { return fmt::format("{} {}", http_->name(), path); };
  auto parsed = json::parse(response.body);
  int code = 0;
  if (response.status < 200 || response.status > 299) {
    std::string message = parsed.isOk() ? errorMessage(*parsed, &code) : std::string();
    if (grpc_code != nullptr) *grpc_code = code;
    if (message.empty()) return http_->statusError(response);
    return Status::systemError(fmt::format("{} answered HTTP {}: {} (gRPC code {})", context(), response.status, message, code));
  }
  if (!parsed.isOk()) return parsed.status().withContext(context());
  if (!parsed->isObject()) return Status::protocol(context() + ": the answer is not a JSON object");
  if (const Value* error = parsed->find("error"); error != nullptr && !(error->isString() && error->asString().empty())) {
    std::string message = errorMessage(*parsed, &code);
    if (grpc_code != nullptr) *grpc_code = code;
    return Status::systemError(fmt::format("{}: {} (gRPC code {})", context(), message, code));
  }
  // Streams wrap each message: {"result": {...}}.
  Value body = std::move(parsed).value();
  if (const Value* result = body.find("result"); result != nullptr && result->isObject()) {
    Value inner = *result;
    body = std::move(inner);
  }
  if (const Value* header = body.find("header"); header != nullptr) {
    auto revision = int64Field(*header, "revision");
    if (!revision.isOk()) return revision.status().withContext(context());
    if (*revision > 0) last_revision_ = *revision;
  }
  return body;
}

Result<int64_t> EtcdClient::grantLease(int64_t ttl_s) {
  if (ttl_s <= 0) return Status::invalidArgument(fmt::format("etcd: lease TTL {} s must be positive", ttl_s));
  PCCL_ASSIGN_OR_RETURN(Value answer, call("/v3/lease/grant", Value::object().set("TTL", int64Value(ttl_s))));
  auto id = int64Field(answer, "ID", "id");
  if (!id.isOk()) return id.status().withContext(url_);
  if (*id <= 0) return Status::protocol(url_ + ": /v3/lease/grant answered without a lease ID");
  return id;
}

Result<int64_t> EtcdClient::keepAlive(int64_t lease) {
  if (lease <= 0) return Status::invalidArgument(fmt::format("etcd: lease id {} is not valid", lease));
  PCCL_ASSIGN_OR_RETURN(Value answer, call("/v3/lease/keepalive", Value::object().set("ID", int64Value(lease))));
  auto ttl = int64Field(answer, "TTL", "ttl");
  if (!ttl.isOk()) return ttl.status().withContext(url_);
  return *ttl > 0 ? *ttl : 0;
}

Status EtcdClient::revokeLease(int64_t lease) {
  if (lease <= 0) return Status::invalidArgument(fmt::format("etcd: lease id {} is not valid", lease));
  int code = 0;
  auto answer = call("/v3/lease/revoke", Value::object().set("ID", int64Value(lease)), &code);
  if (!answer.isOk() && code == kGrpcNotFound) return Status::ok();  // already expired or revoked
  return answer.status();
}

Result<std::optional<EtcdClient::KeyValue>> EtcdClient::get(const std::string& key) {
  PCCL_RETURN_IF_ERROR(checkKey(key));
  PCCL_ASSIGN_OR_RETURN(Value answer, call("/v3/kv/range", Value::object().set("key", bytesValue(key))));
  auto kv = firstKeyValue(answer);
  if (!kv.isOk()) return kv.status().withContext(url_ + " /v3/kv/range");
  return kv;
}

Result<EtcdClient::TxnResult> EtcdClient::txn(const std::string& key, int64_t mod_revision, Value success) {
  PCCL_RETURN_IF_ERROR(checkKey(key));
  if (mod_revision < 0) return Status::invalidArgument(fmt::format("etcd: mod_revision {} is negative", mod_revision));
  Value compare = Value::object();
  compare.set("key", bytesValue(key)).set("result", Value::string("EQUAL"));
  if (mod_revision == 0) {
    compare.set("target", Value::string("CREATE")).set("create_revision", int64Value(0));
  } else {
    compare.set("target", Value::string("MOD")).set("mod_revision", int64Value(mod_revision));
  }
  Value compares = Value::array();
  compares.push(std::move(compare));
  Value successes = Value::array();
  successes.push(std::move(success));
  Value failures = Value::array();
  failures.push(Value::object().set("request_range", Value::object().set("key", bytesValue(key))));
  Value txn_request = Value::object();
  txn_request.set("compare", std::move(compares)).set("success", std::move(successes)).set("failure", std::move(failures));

  PCCL_ASSIGN_OR_RETURN(Value answer, call("/v3/kv/txn", txn_request));
  TxnResult out;
  out.succeeded = answer.find("succeeded") != nullptr && answer.find("succeeded")->asBool();
  out.revision = last_revision_;
  if (out.succeeded) return out;
  const Value* responses = answer.find("responses");
  if (responses == nullptr || !responses->isArray() || responses->size() != 1) {
    return Status::protocol(url_ + " /v3/kv/txn: a failed transaction without its one range response");
  }
  const Value* range = field(responses->at(0), "response_range", "responseRange");
  if (range == nullptr) return Status::protocol(url_ + " /v3/kv/txn: the failure branch's answer is not a range");
  auto kv = firstKeyValue(*range);
  if (!kv.isOk()) return kv.status().withContext(url_ + " /v3/kv/txn");
  out.current = std::move(kv).value();
  return out;
}

Result<EtcdClient::TxnResult> EtcdClient::putIfAbsent(const std::string& key, const std::string& value, int64_t lease) {
  return putIfModRevision(key, value, 0, lease);
}

Result<EtcdClient::TxnResult> EtcdClient::putIfModRevision(const std::string& key, const std::string& value,
                                                           int64_t mod_revision, int64_t lease) {
  if (lease < 0) return Status::invalidArgument(fmt::format("etcd: lease id {} is not valid", lease));
  return txn(key, mod_revision, putRequest(key, value, lease));
}

Result<EtcdClient::TxnResult> EtcdClient::deleteIfModRevision(const std::string& key, int64_t mod_revision) {
  return txn(key, mod_revision, Value::object().set("request_delete_range", Value::object().set("key", bytesValue(key))));
}

}  // namespace pccl::master
