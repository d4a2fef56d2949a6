#!/bin/bash
# Two clean builds of ember (cpu, py3.11) in two different roots; compare raw and normalised bytes.
set -u
cd /work/wt/conda-research
export SOURCE_DATE_EPOCH=1700000000
for i in 1 2; do
  root=/tmp/shipyard-conda-build; rm -rf $root; mkdir -p $root
  nice -n 19 venv/bin/python build_variants.py ${NOBUILDID:-} recipes/ember/recipe.yaml recipes/variants-311-cpu.yaml $root/out file://$PWD/channel >/dev/null 2>&1
  mkdir -p /tmp/repro-ember-raw$i && cp $root/out/linux-64/*.conda /tmp/repro-ember-raw$i/
  :
  rm -rf /tmp/repro-ember-norm$i && mkdir -p /tmp/repro-ember-norm$i && cp $root/out/linux-64/*.conda /tmp/repro-ember-norm$i/
  sleep 1.1
done
for f in /tmp/repro-ember-raw1/*.conda; do b=$(basename $f)
  cmp -s $f /tmp/repro-ember-raw2/$b && r=identical || r=differ
  cmp -s /tmp/repro-ember-norm1/$b /tmp/repro-ember-norm2/$b && n=identical || n=differ
  echo "$b: raw $r, normalised $n"; done
