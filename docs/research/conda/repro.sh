#!/bin/bash
# build the hello recipe twice into clean dirs and compare bytes
set -e
cd /work/wt/conda-research
for i in 1 2; do
  rm -rf /tmp/repro$i && mkdir -p /tmp/repro$i
  sed "s#Path(\"out\")#Path(\"/tmp/repro$i\")#" build_hello.py > /tmp/bh$i.py
  nice -n 19 venv/bin/python /tmp/bh$i.py >/dev/null 2>&1
  sleep 1.1
done
for f in /tmp/repro1/noarch/*.conda; do cmp $f /tmp/repro2/noarch/$(basename $f) && echo "IDENTICAL $(basename $f)"; done
