#!/bin/sh
# Fails if libprometorch.so exports any defined symbol not starting with pt_ (the C API
# contract: everything else is hidden).
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v '^pt_' | grep -v '^_init$' | grep -v '^_fini$' | grep -v '^_edata$' | grep -v '^_end$' | grep -v '^__bss_start$')
if [ -n "$bad" ]; then
  echo "symbols exported without the pt_ prefix:"
  echo "$bad"
  exit 1
fi
echo "1 passed, 0 failed"
