#!/usr/bin/env bash
# libpccl.so exports its API and nothing else (src/capi/libpccl.map):
#  - every dynamic symbol it defines is a C API symbol (pccl*), a symbol of the C++ API (namespace
#    pccl: functions _ZN4pccl / _ZNK4pccl, typeinfo _ZTIN4pccl, its name _ZTSN4pccl, vtables
#    _ZTVN4pccl), or GNU ld's symbol of the version node PCCL_<major>.<minor>; anything else (asio, fmt, libsodium glue,
#    internal layers, the standard library's templates) is a leak and is listed;
#  - the version node exists (the version script was applied);
#  - every function pccl.h declares PCCL_API is exported as a function, so a declaration without a
#    definition (or one the map hides) fails.
#   tests/symbols.sh LIBPCCL PCCL_H
set -euo pipefail
usage() { echo "usage: $0 path/to/libpccl.so include/pccl/pccl.h   (libpccl exports its API and nothing else)"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "symbols: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
if [ $# -ne 2 ]; then
  usage >&2
  exit 2
fi
lib=$1 header=$2
[ -f "$lib" ] || { echo "symbols: no library at $lib" >&2; exit 2; }
[ -f "$header" ] || { echo "symbols: no header at $header" >&2; exit 2; }

# "ADDRESS TYPE NAME[@[@]VERSION]" per defined dynamic symbol; newer binutils append the version.
table=$(nm -D --defined-only "$lib" | awk 'NF >= 2 { sub(/@.*/, "", $NF); print $(NF - 1), $NF }')
if [ -z "$table" ]; then
  echo "symbols: $lib defines no dynamic symbols" >&2
  exit 1
fi
status=0

leaked=$(awk '{ print $2 }' <<< "$table" |
  grep -vE '^(pccl[A-Za-z0-9_]*|_ZN4pccl[0-9A-Za-z_]*|_ZNK4pccl[0-9A-Za-z_]*|_ZT[ISV]N4pccl[0-9A-Za-z_]*|PCCL_[0-9]+\.[0-9]+)$' || true)
if [ -n "$leaked" ]; then
  echo "symbols: $lib exports $(wc -l <<< "$leaked") symbol(s) outside the pccl API:" >&2
  while read -r s; do
    printf '  %s  (%s)\n' "$s" "$(c++filt "$s" 2>/dev/null || echo "$s")" >&2
  done <<< "$leaked"
  status=1
fi

# The version definitions (GNU ld also defines an absolute symbol of the node's name; lld does not).
if ! readelf -V --wide "$lib" | grep -qE 'Name: PCCL_[0-9]+\.[0-9]+$'; then
  echo "symbols: no PCCL_<major>.<minor> version node: was src/capi/libpccl.map applied?" >&2
  status=1
fi

# The header's PCCL_API functions: the name before the first '(' on a line starting with PCCL_API.
declared=$(sed -n 's/^[[:space:]]*PCCL_API[^(]*[^A-Za-z0-9_]\(pccl[A-Za-z0-9_]*\)[[:space:]]*(.*/\1/p' "$header" | sort -u)
if [ -z "$declared" ]; then
  echo "symbols: found no PCCL_API function in $header" >&2
  exit 1
fi
functions=$(awk '$1 == "T" || $1 == "W" || $1 == "i" { print $2 }' <<< "$table" | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$functions"))
if [ -n "$missing" ]; then
  echo "symbols: declared PCCL_API in $header but not exported as functions by $lib:" >&2
  sed 's/^/  /' <<< "$missing" >&2
  status=1
fi

if [ "$status" -eq 0 ]; then
  echo "symbols: $(wc -l <<< "$table") exported symbols, all pccl API; $(wc -l <<< "$declared") C API functions of $(basename "$header") all exported"
fi
exit "$status"
