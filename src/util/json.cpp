#include "util/json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

namespace pccl::json {

// ---- Value ----

const std::string& Value::empty() {
  static const std::string kEmpty;
  return kEmpty;
}

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

Value Value::integer(int64_t n) {
  Value v;
  v.type_ = Type::kNumber;
  v.text_ = std::to_string(n);
  return v;
}

Value Value::real(double d) {
  if (!std::isfinite(d)) return Value();
  Value v;
  v.type_ = Type::kNumber;
  v.text_ = fmt::format("{}", d);  // shortest text that reads back as d
  // fmt writes "inf"/"nan" only for non-finite values; "1e+20" and "1.5" are valid JSON numbers as is.
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.text_ = std::move(s);
  return v;
}

Value Value::array() {
  Value v;
  v.type_ = Type::kArray;
  return v;
}

Value Value::object() {
  Value v;
  v.type_ = Type::kObject;
  return v;
}

std::optional<int64_t> Value::asInt64() const {
  if (type_ != Type::kNumber) return std::nullopt;
  if (text_.find_first_of(".eE") != std::string::npos) return std::nullopt;
  int64_t n = 0;
  const char* end = text_.data() + text_.size();
  auto [ptr, ec] = std::from_chars(text_.data(), end, n);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return n;
}

std::optional<double> Value::asDouble() const {
  if (type_ != Type::kNumber) return std::nullopt;
  double d = 0;
  const char* end = text_.data() + text_.size();
  auto [ptr, ec] = std::from_chars(text_.data(), end, d);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return d;
}

Value& Value::push(Value v) {
  if (type_ != Type::kArray) *this = array();
  items_.push_back(std::move(v));
  return items_.back();
}

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

Value& Value::set(std::string key, Value v) {
  if (type_ != Type::kObject) *this = object();
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) {
      items_[i] = std::move(v);
      return *this;
    }
  }
  keys_.push_back(std::move(key));
  items_.push_back(std::move(v));
  return *this;
}

bool Value::operator==(const Value& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::kNull: return true;
    case Type::kBool: return bool_ == o.bool_;
    case Type::kNumber:
    case Type::kString: return text_ == o.text_;
    case Type::kArray: return items_ == o.items_;
    case Type::kObject: {
      if (keys_.size() != o.keys_.size()) return false;
      for (size_t i = 0; i < keys_.size(); ++i) {
        const Value* other = o.find(keys_[i]);
        if (other == nullptr || !(items_[i] == *other)) return false;
      }
      return true;
    }
  }
  return false;
}

// ---- Serializer ----

namespace {

void appendQuoted(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

}  // namespace

std::string quote(std::string_view s) {
  std::string out;
  appendQuoted(out, s);
  return out;
}

void Value::serializeTo(std::string& out) const {
  switch (type_) {
    case Type::kNull: out += "null"; return;
    case Type::kBool: out += bool_ ? "true" : "false"; return;
    case Type::kNumber: out += text_; return;
    case Type::kString: appendQuoted(out, text_); return;
    case Type::kArray:
      out.push_back('[');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out.push_back(',');
        items_[i].serializeTo(out);
      }
      out.push_back(']');
      return;
    case Type::kObject:
      out.push_back('{');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out.push_back(',');
        appendQuoted(out, keys_[i]);
        out.push_back(':');
        items_[i].serializeTo(out);
      }
      out.push_back('}');
      return;
  }
}

std::string Value::serialize() const {
  std::string out;
  serializeTo(out);
  return out;
}

// ---- Parser ----

// Recursive descent over the input; depth bounded by ParseLimits::max_depth.
class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : s_(text), limits_(limits) {}

  Result<Value> parseDocument() {
    if (s_.size() > limits_.max_bytes) {
      return Status::protocol(fmt::format("JSON: input of {} bytes exceeds the limit of {}", s_.size(), limits_.max_bytes));
    }
    Value v;
    skipSpace();
    if (!parseValue(v, 0)) return error_;
    skipSpace();
    if (pos_ != s_.size()) {
      fail("trailing characters after the value");
      return error_;
    }
    return v;
  }

 private:
  bool fail(const std::string& what) { return failAt(what, pos_); }
  bool failAt(const std::string& what, size_t offset) {
    error_ = Status::protocol(fmt::format("JSON: {} at offset {}", what, offset));
    return false;
  }
  bool atEnd() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  void skipSpace() {
    while (!atEnd() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool parseValue(Value& out, size_t depth) {
    if (atEnd()) return fail("unexpected end of input");
    switch (peek()) {
      case 'n': return literal("null");
      case 't':
        out = Value::boolean(true);
        return literal("true");
      case 'f':
        out = Value::boolean(false);
        return literal("false");
      case '"':
        out.type_ = Type::kString;
        return parseString(out.text_);
      case '[': return parseArray(out, depth + 1);
      case '{': return parseObject(out, depth + 1);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parseNumber(out);
        return fail(fmt::format("unexpected character '{}'", printable(peek())));
    }
  }

  static std::string printable(char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7F ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }

  bool enter(size_t depth) {
    if (depth > limits_.max_depth) return fail(fmt::format("nesting deeper than {}", limits_.max_depth));
    ++pos_;  // '[' or '{'
    skipSpace();
    return true;
  }

  bool parseArray(Value& out, size_t depth) {
    if (!enter(depth)) return false;
    out = Value::array();
    if (!atEnd() && peek() == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      out.items_.emplace_back();
      if (!parseValue(out.items_.back(), depth)) return false;
      skipSpace();
      if (atEnd()) return fail("unterminated array");
      char c = s_[pos_++];
      if (c == ']') return true;
      if (c != ',') return failAt("expected ',' or ']'", pos_ - 1);
      skipSpace();
    }
  }

  bool parseObject(Value& out, size_t depth) {
    size_t start = pos_;
    if (!enter(depth)) return false;
    out = Value::object();
    if (!atEnd() && peek() == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      if (atEnd() || peek() != '"') return fail("expected a string key");
      out.keys_.emplace_back();
      if (!parseString(out.keys_.back())) return false;
      skipSpace();
      if (atEnd() || peek() != ':') return fail("expected ':'");
      ++pos_;
      skipSpace();
      out.items_.emplace_back();
      if (!parseValue(out.items_.back(), depth)) return false;
      skipSpace();
      if (atEnd()) return fail("unterminated object");
      char c = s_[pos_++];
      if (c == '}') break;
      if (c != ',') return failAt("expected ',' or '}'", pos_ - 1);
      skipSpace();
    }
    return checkUniqueKeys(out.keys_, start);
  }

  bool checkUniqueKeys(const std::vector<std::string>& keys, size_t object_start) {
    std::vector<const std::string*> sorted;
    sorted.reserve(keys.size());
    for (const auto& k : keys) sorted.push_back(&k);
    std::sort(sorted.begin(), sorted.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (*sorted[i] == *sorted[i - 1]) return failAt("duplicate key " + quote(*sorted[i]) + " in the object", object_start);
    }
    return true;
  }

  bool digits() {
    size_t start = pos_;
    while (!atEnd() && peek() >= '0' && peek() <= '9') ++pos_;
    return pos_ > start;
  }

  bool parseNumber(Value& out) {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (atEnd()) return fail("truncated number");
    if (peek() == '0') {
      ++pos_;
      if (!atEnd() && peek() >= '0' && peek() <= '9') return fail("leading zero in a number");
    } else if (!digits()) {
      return fail("expected a digit");
    }
    if (!atEnd() && peek() == '.') {
      ++pos_;
      if (!digits()) return fail("expected a digit after '.'");
    }
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!atEnd() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digits()) return fail("expected a digit in the exponent");
    }
    out.type_ = Type::kNumber;
    out.text_ = std::string(s_.substr(start, pos_ - start));
    return true;
  }

  // Four hex digits at pos_.
  bool hex4(uint32_t& out) {
    if (s_.size() - pos_ < 4) return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      uint32_t d;
      if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
      else return failAt("invalid hex digit in a \\u escape", pos_ - 1);
      out = (out << 4) | d;
    }
    return true;
  }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // pos_ is just past "\u".
  bool unicodeEscape(std::string& out) {
    size_t start = pos_ - 2;
    uint32_t cp;
    if (!hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return failAt("unpaired low surrogate", start);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (s_.substr(pos_, 2) != "\\u") return failAt("unpaired high surrogate", start);
      pos_ += 2;
      uint32_t low;
      if (!hex4(low)) return false;
      if (low < 0xDC00 || low > 0xDFFF) return failAt("high surrogate not followed by a low one", start);
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(out, cp);
    return true;
  }

  // One UTF-8 sequence starting at pos_ (a byte >= 0x80), copied to out. Rejects overlong forms,
  // encoded surrogates and code points above U+10FFFF.
  bool utf8Sequence(std::string& out) {
    size_t start = pos_;
    auto byte = [&](size_t i) { return static_cast<unsigned char>(s_[start + i]); };
    unsigned char b0 = byte(0);
    size_t len;
    uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) { len = 2; cp = b0 & 0x1Fu; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) { len = 3; cp = b0 & 0x0Fu; }
    else if (b0 >= 0xF0 && b0 <= 0xF4) { len = 4; cp = b0 & 0x07u; }
    else return fail("invalid UTF-8 in a string");
    if (s_.size() - start < len) return fail("truncated UTF-8 sequence in a string");
    for (size_t i = 1; i < len; ++i) {
      if ((byte(i) & 0xC0) != 0x80) return fail("invalid UTF-8 in a string");
      cp = (cp << 6) | (byte(i) & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return fail("overlong UTF-8 in a string");
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return fail("invalid code point in a string");
    out.append(s_.substr(start, len));
    pos_ += len;
    return true;
  }

  // pos_ at the opening quote.
  bool parseString(std::string& out) {
    size_t start = pos_++;
    for (;;) {
      if (atEnd()) return failAt("unterminated string", start);
      char c = peek();
      auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (u < 0x20) return fail("control character in a string");
      if (u >= 0x80) {
        if (!utf8Sequence(out)) return false;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (atEnd()) return failAt("unterminated string", start);
      char e = s_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u':
          if (!unicodeEscape(out)) return false;
          break;
        default: return failAt("invalid escape '\\" + printable(e) + "'", pos_ - 2);
      }
    }
  }

  std::string_view s_;
  const ParseLimits& limits_;
  size_t pos_ = 0;
  Status error_;
};

Result<Value> parse(std::string_view text, const ParseLimits& limits) { return Parser(text, limits).parseDocument(); }

}  // namespace pccl::json

namespace pccl {

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t g = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    out.push_back(kAlphabet[(g >> 18) & 63]);
    out.push_back(kAlphabet[(g >> 12) & 63]);
    out.push_back(kAlphabet[(g >> 6) & 63]);
    out.push_back(kAlphabet[g & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t g = at(i) << 16;
    if (rest == 2) g |= at(i + 1) << 8;
    out.push_back(kAlphabet[(g >> 18) & 63]);
    out.push_back(kAlphabet[(g >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(g >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument(fmt::format("invalid base64 ({}): {:.40}", why, text));
  };
  if (text.size() % 4 != 0) return bad("length not a multiple of 4");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    size_t data = last ? 4 - pad : 4;
    uint32_t g = 0;
    for (size_t k = 0; k < 4; ++k) {
      int v = k < data ? sextet(text[i + k]) : 0;
      if (v < 0) return bad(fmt::format("unexpected character at offset {}", i + k));
      g = (g << 6) | static_cast<uint32_t>(v);
    }
    out.push_back(static_cast<char>((g >> 16) & 0xFF));
    if (data >= 3) out.push_back(static_cast<char>((g >> 8) & 0xFF));
    if (data == 4) out.push_back(static_cast<char>(g & 0xFF));
    if (last && ((pad == 1 && (g & 0xFF) != 0) || (pad == 2 && (g & 0xFFFF) != 0))) return bad("non-zero padding bits");
  }
  return out;
}

}  // namespace pccl
