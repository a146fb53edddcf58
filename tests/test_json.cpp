// util/json: the strict JSON parser (RFC 8259: errors with their offset, depth and size limits), the
// serializer, and base64 (RFC 4648, strict decoding). The etcd client's wire format stands on these.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "util/json.hpp"

using namespace pccl;

TEST_CASE("json: parse and serialize round trip", "[json]") {
  const std::vector<std::string> texts = {
      "null", "true", "false", "0", "-0", "12", "-9223372036854775808", "1.5e+300", "2E-3", "0.25",
      R"("")", R"("a\"b\\c\n\t\u0001")", "[]", "{}", R"([1,"x",[true,null],{"k":{}}])",
      R"({"header":{"revision":"7"},"kvs":[{"key":"Zm9v","lease":"4111120266901442568"}],"count":"1"})"};
  for (const auto& t : texts) {
    INFO(t);
    auto v = json::parse(t);
    REQUIRE(v.isOk());
    CHECK(v->serialize() == t);
    auto again = json::parse(v->serialize());
    REQUIRE(again.isOk());
    CHECK(*again == *v);
  }
  auto spaced = json::parse(" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : null }\n ");
  REQUIRE(spaced.isOk());
  CHECK(spaced->serialize() == R"({"a":[1,2],"b":null})");
  CHECK(spaced->find("a")->at(1).asInt64() == 2);
  CHECK(spaced->find("b")->isNull());
  CHECK(spaced->find("c") == nullptr);

  auto big = json::parse("[9223372036854775807, 9223372036854775808, 1.0, 3e2, -17]");
  REQUIRE(big.isOk());
  CHECK(big->at(0).asInt64() == INT64_MAX);
  CHECK_FALSE(big->at(1).asInt64().has_value());  // out of range: the text survives
  CHECK(big->at(1).numberText() == "9223372036854775808");
  CHECK_FALSE(big->at(2).asInt64().has_value());
  CHECK(big->at(2).asDouble() == 1.0);
  CHECK(big->at(3).asDouble() == 300.0);
  CHECK(big->at(4).asInt64() == -17);

  json::Value built = json::Value::object();
  built.set("s", json::Value::string("line\nquote\"\x1f")).set("n", json::Value::integer(-5));
  built.set("d", json::Value::real(0.1)).set("inf", json::Value::real(std::numeric_limits<double>::infinity())).set("n", json::Value::integer(6));
  built.set("a", json::Value::array()).set("b", json::Value::boolean(true));
  CHECK(built.serialize() == R"({"s":"line\nquote\"\u001f","n":6,"d":0.1,"inf":null,"a":[],"b":true})");
  auto back = json::parse(built.serialize());
  REQUIRE(back.isOk());
  CHECK(*back == built);
  CHECK(back->find("s")->asString() == "line\nquote\"\x1f");
  CHECK(json::quote("\b\f\r\t/\x7f") == "\"\\b\\f\\r\\t/\x7f\"");
}

TEST_CASE("json: unicode escapes and surrogate pairs decode to UTF-8", "[json]") {
  auto v = json::parse(R"("\u0041\u00e9\u20ac\ud83d\ude00\/")");
  REQUIRE(v.isOk());
  CHECK(v->asString() == "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/");
  auto raw = json::parse("\"\xc3\xa9\xf0\x9f\x98\x80\"");  // raw UTF-8 passes through
  REQUIRE(raw.isOk());
  CHECK(raw->asString() == "\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(raw->serialize() == "\"\xc3\xa9\xf0\x9f\x98\x80\"");
}

TEST_CASE("json: the strict parser rejects malformed input and says where", "[json]") {
  struct Bad {
    std::string text;
    std::string why;
    size_t offset;
  };
  const std::vector<Bad> cases = {
      {"", "unexpected end", 0},
      {"[1,]", "unexpected character", 3},
      {"{\"a\":1,}", "expected a string key", 7},
      {"01", "leading zero", 1},
      {"1.", "digit after '.'", 2},
      {"-", "truncated number", 1},
      {"1e", "exponent", 2},
      {"+1", "unexpected character", 0},
      {"nul", "invalid literal", 0},
      {"'a'", "unexpected character", 0},
      {"[1] x", "trailing characters", 4},
      {"{} {}", "trailing characters", 3},
      {"\"abc", "unterminated string", 0},
      {"\"a\nb\"", "control character", 2},
      {"\"\\x\"", "invalid escape", 1},
      {"\"\\u12g4\"", "invalid hex digit", 5},
      {"\"\\ud800\"", "unpaired high surrogate", 1},
      {"\"\\ud800\\u0041\"", "not followed by a low", 1},
      {"\"\\udc00\"", "unpaired low surrogate", 1},
      {"\"\xc3", "truncated UTF-8", 1},
      {"\"\xc0\xaf\"", "invalid UTF-8", 1},
      {"\"\xe0\x80\xaf\"", "overlong", 1},
      {"\"\xed\xa0\x80\"", "invalid code point", 1},
      {"\"\xff\"", "invalid UTF-8", 1},
      {"{\"a\":1,\"a\":2}", "duplicate key", 0},
      {"[1 2]", "expected ',' or ']'", 3},
      {"{\"a\" 1}", "expected ':'", 5},
      {"/*c*/1", "unexpected character", 0},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto r = json::parse(c.text);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kProtocolError);
    CHECK_THAT(r.status().message(), Catch::Contains(c.why) && Catch::EndsWith("at offset " + std::to_string(c.offset)));
  }
}

TEST_CASE("json: nesting beyond the depth limit is refused, at the limit accepted", "[json]") {
  json::ParseLimits limits;
  limits.max_depth = 16;
  CHECK(json::parse(std::string(16, '[') + std::string(16, ']'), limits).isOk());
  auto deep = json::parse(std::string(17, '[') + std::string(17, ']'), limits);
  REQUIRE_FALSE(deep.isOk());
  CHECK_THAT(deep.status().message(), Catch::Contains("nesting deeper than 16"));
  // The default limit guards the stack against a hostile answer.
  auto hostile = json::parse(std::string(100000, '['));
  REQUIRE_FALSE(hostile.isOk());
  CHECK_THAT(hostile.status().message(), Catch::Contains("nesting deeper"));
  limits.max_bytes = 4;
  CHECK_FALSE(json::parse("[1,2]", limits).isOk());
}

TEST_CASE("base64: RFC 4648 vectors, every byte value, strict decoding", "[json]") {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    CHECK(base64Encode(plain) == encoded);
    auto d = base64Decode(encoded);
    REQUIRE(d.isOk());
    CHECK(*d == plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n = 0; n <= all.size(); n += 37) {
    auto d = base64Decode(base64Encode(all.substr(0, n)));
    REQUIRE(d.isOk());
    CHECK(*d == all.substr(0, n));
  }
  CHECK(base64Encode("\xfb\xff") == "+/8=");
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zm9v=", "Zm=v", "Zm9v Yg==", "Zh==", "Zm9=", "Zm-v", "====", "Zg==Zg=="}) {
    INFO(bad);
    auto d = base64Decode(bad);
    REQUIRE_FALSE(d.isOk());
    CHECK(d.status().code() == Code::kInvalidArgument);
  }
}
