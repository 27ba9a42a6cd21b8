#!/bin/sh
# ELF-level checks of the plugin .so (ctest abi.exports, abi.no_libibverbs,
# abi.no_libhwloc).
#
# exports: `nm -D --defined-only` must list exactly NCCL's net (v8-v12),
#   tuner (v2-v6) and CollNet (v8-v12) tables, each a data object of its
#   ABI size (NCCL's src/include/plugin/net/net_vN.h, tuner/tuner_vN.h).
#   No profiler, GIN, RMA or env table: NCCL looks for those in the net
#   plugin's library too and would adopt them (src/plugin/plugin_open.cc,
#   ncclGetNetPluginLib, 2.30).
#   Nothing else is allowed, linker symbols included: the anonymous version
#   script (plugin/exports.map, `local: *`) makes _edata, _end and
#   __bss_start local, _init/_fini are reached through DT_INIT/DT_FINI and
#   never enter .dynsym, and an anonymous script defines no version node
#   symbol. A symbol that leaks past it would be bound by NCCL's process
#   and could clash with another plugin's, so any extra name fails.
# no_libibverbs: the .so must load on hosts without rdma-core: no NEEDED
#   entry for libibverbs/librdmacm/libmlx5 and no undefined ibv_ symbol
#   (verbs, if ever used, come through dlopen).
# no_libhwloc: likewise without hwloc (plain CUDA images lack it): no NEEDED
#   libhwloc and no undefined hwloc_ symbol (topology/load/hwloc_api.h).
set -u
mode=$1
so=$2
[ -f "$so" ] || { echo "FAIL: $so does not exist"; exit 1; }

# no_direct_link NEEDED_RE SYMBOL_PREFIX WHAT: no NEEDED entry matching the
# regex and no undefined symbol with the prefix.
no_direct_link() {
  needed=$(readelf -d "$so" | grep NEEDED)
  echo "$needed"
  if echo "$needed" | grep -Eq "$1"; then
    echo "FAIL: $so links $3 directly"
    exit 1
  fi
  if nm -D --undefined-only "$so" | grep -q " $2"; then
    echo "FAIL: $so has undefined $2 symbols"
    nm -D --undefined-only "$so" | grep " $2"
    exit 1
  fi
  echo "ok: nothing matching '$1' in NEEDED, no undefined $2 symbol"
}

case $mode in
exports)
  # name size: 8-byte slots. Net v8 19, v9/v10 20, v11/v12 22; tuner v2-v5
  # 4, v6 5; CollNet v8 17, v9/v10 18, v11/v12 19.
  expected='ncclCollNetPlugin_v10 144
ncclCollNetPlugin_v11 152
ncclCollNetPlugin_v12 152
ncclCollNetPlugin_v8 136
ncclCollNetPlugin_v9 144
ncclNetPlugin_v10 160
ncclNetPlugin_v11 176
ncclNetPlugin_v12 176
ncclNetPlugin_v8 152
ncclNetPlugin_v9 160
ncclTunerPlugin_v2 32
ncclTunerPlugin_v3 32
ncclTunerPlugin_v4 32
ncclTunerPlugin_v5 32
ncclTunerPlugin_v6 40'
  # With -S a line is "value size type name"; objects only (type D/R/B).
  actual=$(nm -D --defined-only -S "$so" | while read -r value size type name rest; do
    case $type in
    [DdRrBb]) [ -n "$name" ] && [ -z "$rest" ] && echo "$name $((0x$size))" && continue ;;
    esac
    echo "unexpected: $value $size $type $name $rest"
  done | LC_ALL=C sort)
  if [ "$actual" != "$expected" ]; then
    echo "FAIL: exported symbols of $so"
    echo "--- expected"; echo "$expected"
    echo "--- actual (nm -D --defined-only -S)"; nm -D --defined-only -S "$so"
    exit 1
  fi
  echo "ok: exactly the 15 NCCL net, tuner and CollNet tables are exported, with their ABI sizes"
  ;;
no_libibverbs)
  no_direct_link 'libibverbs|librdmacm|libmlx' ibv_ "an RDMA library"
  ;;
no_libhwloc)
  no_direct_link libhwloc hwloc_ libhwloc
  ;;
*)
  echo "usage: check_elf.sh exports|no_libibverbs|no_libhwloc LIB.so"
  exit 2
  ;;
esac
