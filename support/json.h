// A JSON object built field by field, for the benchmark programs' result
// lines. Shared by the example, benchmark and soak programs only, not part of
// the installed library.
#ifndef TIMINGWHEEL_SUPPORT_JSON_H_
#define TIMINGWHEEL_SUPPORT_JSON_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace support {

// `s` as the inside of a JSON string. Control characters become spaces: the
// values are CPU models, names and git revisions, never binary.
inline std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// One JSON object on one line, fields in insertion order. Doubles are
// printed with 6 significant digits ("%.6g") and a non-finite one as null:
// the result files' readers (bench/*.py) rely on both.
class Json {
 public:
  Json& Add(const std::string& k, const std::string& v) {
    // Appended, not `"\"" + JsonEscape(v) + "\""`: where g++ 12 inlines that
    // operator+ it warns of a bogus overlapping memcpy (-Wrestrict, GCC bug
    // 105329), which bench/workloads.cc set off.
    std::string quoted = "\"";
    quoted += JsonEscape(v);
    quoted += '"';
    return Raw(k, quoted);
  }
  Json& Add(const std::string& k, const char* v) {
    return Add(k, std::string(v));
  }
  Json& Add(const std::string& k, double v) {
    if (!std::isfinite(v)) return Raw(k, "null");
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    return Raw(k, buf);
  }
  Json& Add(const std::string& k, std::int64_t v) {
    return Raw(k, std::to_string(v));
  }
  Json& Add(const std::string& k, int v) {
    return Add(k, static_cast<std::int64_t>(v));
  }
  Json& Add(const std::string& k, std::uint64_t v) {
    return Raw(k, std::to_string(v));
  }
  // A nested object.
  Json& Add(const std::string& k, const Json& v) { return Raw(k, v.str()); }
  // `v` must already be JSON.
  Json& Raw(const std::string& k, const std::string& v) {
    if (!body_.empty()) body_ += ",";
    // Appended piece by piece, for the reason given in Add(k, string).
    body_ += '"';
    body_ += JsonEscape(k);
    body_ += "\":";
    body_ += v;
    return *this;
  }
  // Appends the fields of `other`, in its order.
  Json& Append(const Json& other) {
    if (!body_.empty() && !other.body_.empty()) body_ += ",";
    body_ += other.body_;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_JSON_H_
