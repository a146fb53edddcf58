// A minimal JSON value with a strict parser (RFC 8259) and a serializer, plus base64 (RFC 4648,
// standard alphabet, padded): what a client of a JSON-over-HTTP service (etcd's gateway) needs.
// Pure functions and a value type: no I/O, no threads.
#ifndef PCCL_UTIL_JSON_HPP_
#define PCCL_UTIL_JSON_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pccl/status.hpp"

namespace pccl::json {

enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

// One JSON value. Numbers keep their text as written (so a 64-bit integer survives untouched) and are
// converted on request. Objects keep their members in insertion order; keys are unique.
// Strings hold UTF-8 bytes; the serializer escapes '"', '\\' and control characters and copies every
// other byte as it is.
class Value {
 public:
  Value() = default;  // null
  static Value null() { return Value(); }
  static Value boolean(bool b);
  static Value integer(int64_t n);
  // A finite double in its shortest round-trip form; NaN and infinities (not JSON) become null.
  static Value real(double d);
  static Value string(std::string s);
  static Value array();
  static Value object();

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::kNull; }
  bool isBool() const { return type_ == Type::kBool; }
  bool isNumber() const { return type_ == Type::kNumber; }
  bool isString() const { return type_ == Type::kString; }
  bool isArray() const { return type_ == Type::kArray; }
  bool isObject() const { return type_ == Type::kObject; }

  // Scalars. asBool() is false, asString()/numberText() empty, on a value of another type.
  bool asBool() const { return type_ == Type::kBool && bool_; }
  const std::string& asString() const { return type_ == Type::kString ? text_ : empty(); }
  const std::string& numberText() const { return type_ == Type::kNumber ? text_ : empty(); }
  // The number as an int64 when it is written as an integer (no fraction or exponent) in range.
  std::optional<int64_t> asInt64() const;
  // The number as the nearest double (nullopt for a non-number or an out-of-range exponent).
  std::optional<double> asDouble() const;

  // Arrays and objects: the number of elements or members (0 for a scalar).
  size_t size() const { return items_.size(); }
  // Arrays: element i (i < size()); push() on a non-array turns it into an empty array first.
  const Value& at(size_t i) const { return items_[i]; }
  Value& push(Value v);
  // Objects: the member named `key`, or nullptr (also for a non-object).
  const Value* find(std::string_view key) const;
  // Sets (or replaces) a member and returns *this for chaining; a non-object becomes an empty object first.
  Value& set(std::string key, Value v);
  // Objects: member i's key and value, in insertion order (i < size()).
  const std::string& keyAt(size_t i) const { return keys_[i]; }
  const Value& valueAt(size_t i) const { return items_[i]; }

  // Compact JSON text (no whitespace).
  std::string serialize() const;
  void serializeTo(std::string& out) const;

  // Structural equality; numbers compare by their text ("1.0" != "1").
  bool operator==(const Value& o) const;
  bool operator!=(const Value& o) const { return !(*this == o); }

 private:
  friend class Parser;
  static const std::string& empty();

  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;               // a string's bytes or a number's text
  std::vector<std::string> keys_;  // an object's keys, parallel to items_
  std::vector<Value> items_;       // an array's elements or an object's values
};

struct ParseLimits {
  size_t max_depth = 64;          // nesting of arrays and objects
  size_t max_bytes = 16u << 20;   // input size
};

// Parses exactly one JSON text: surrounding whitespace is allowed, anything else after the value is an
// error. Rejects what RFC 8259 does not allow (comments, trailing commas, leading zeros, single quotes,
// raw control characters in strings, invalid UTF-8, unpaired surrogates in \u escapes) and duplicate
// keys. Errors are Code::kProtocolError, "JSON: <what> at offset N".
Result<Value> parse(std::string_view text, const ParseLimits& limits = {});

// A JSON string literal for `s`, quotes included.
std::string quote(std::string_view s);

}  // namespace pccl::json

namespace pccl {

// Base64 with the standard alphabet and '=' padding.
std::string base64Encode(std::string_view bytes);
// Strict: the length must be a multiple of 4, padding only at the end, no whitespace, and the unused
// bits of the last group zero (so every input has exactly one encoding). InvalidArgument otherwise.
Result<std::string> base64Decode(std::string_view text);

}  // namespace pccl

#endif  // PCCL_UTIL_JSON_HPP_
