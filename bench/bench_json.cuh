#pragma once
// JSON value formatting shared by the benchmark programs (they write their flat JSON with printf).
#include <cmath>
#include <cstdio>
#include <string>

namespace bench_json {

/// A JSON string literal (quotes and backslashes escaped, control characters dropped).
inline std::string str(const std::string& s)
{
  std::string out = "\"";
  for (const char c : s)
  {
    if (c == '"' || c == '\\') { out += '\\'; }
    if (static_cast<unsigned char>(c) >= 0x20) { out += c; }
  }
  return out + "\"";
}

/// A number, or null when not finite (JSON has no inf or NaN).
inline std::string num(double v)
{
  if (!std::isfinite(v)) { return "null"; }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace bench_json
