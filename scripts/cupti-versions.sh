#!/usr/bin/env bash
# Which CUPTI versions load against this machine's driver, and the dev split
# recorded under several of them (docs/cupti-versions.md). Run from a folder
# holding `causalbench` and `lib/<version>.libcupti.so.<major>.xz` (CUPTI
# libraries unpacked from the PyPI wheels); writes into $OUT:
#   machine.txt, load-table.tsv, corpora.tgz (one folder per recorded version).
set -u
D=${CUPTI_KIT:-$PWD/.gpubin-cupti}
B=$D/causalbench
CASES=${CASES:-60}
RECORD=${RECORD:-}
TK=/usr/local/cuda/targets/x86_64-linux/lib
chmod +x "$B"
W=/tmp/cupti-versions
rm -rf $W && mkdir -p $W/lib $W/probe $W/corpora
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc; } > $OUT/machine.txt 2>&1

# One folder per candidate, holding only that CUPTI, also as libcupti.so (the
# first name the recorder's loader tries), so nothing else shadows it.
add() { # label file
  [ -f "$2" ] || return
  local dir=$W/lib/$1 name=$(basename "$2"); mkdir -p $dir
  cp -L "$2" $dir/$name && [ "$name" = libcupti.so ] || ln -sf $name $dir/libcupti.so
}
for f in $D/lib/*.xz; do
  n=$(basename $f .xz); v=${n%.libcupti.so.*}; major=${n##*.libcupti.so.}
  mkdir -p $W/lib/$v
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $f $W/lib/$v/libcupti.so.$major
  ln -sf libcupti.so.$major $W/lib/$v/libcupti.so
done
add toolkit "$(ls $TK/libcupti.so.13* 2>/dev/null | sort | tail -1)"
t=$(find /opt /usr/local/lib/python3* -name 'libcupti.so*' -path '*site-packages*' 2>/dev/null | sort | head -1); [ -n "$t" ] && add pytorch "$t"
n=$(find /opt /usr/local -name 'libcupti.so*' -path '*nsight-compute*' 2>/dev/null | sort | head -1); [ -n "$n" ] && add nsight-compute "$n"
{ echo "found: toolkit=$(ls $TK/libcupti.so.13* 2>/dev/null | tr '\n' ' ') pytorch=$t nsight-compute=$n"; ls /usr/local/cuda/compat 2>&1 | tr '\n' ' '; echo; } >> $OUT/machine.txt

# The load table: one recorded case per CUPTI (and the toolkit's under the compat driver).
probe() { # label ld_path lib
  local out=$W/probe/$1; S=$(date +%s%N)
  LD_LIBRARY_PATH=$2 CAUSALBENCH_CUPTI_LIB=$3 timeout 45 $B corpus record --suite dev --cases 1 --out $out > $out.log 2>&1
  local rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))
  local caps=$(zcat -f $(ls $out/*.bundle.json* 2>/dev/null | head -1) 2>/dev/null | python3 -c "import json,sys; m=json.load(sys.stdin)['manifest']; c=m.get('cupti_capabilities') or {}; print(m['cupti'], '|', c.get('clock'), '|', ','.join(u['what'] for u in c.get('unobservable',[])) or '-')" 2>/dev/null)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$rc" "$ms" "$3" "${caps:--}" "$(grep -v '^ok ' $out.log | tail -2 | tr '\t\n' '  ' | cut -c1-400)" >> $OUT/load-table.tsv
}
printf 'label\trc\tms\tlibrary\tmanifest cupti | clock | unobservable\tlast lines\n' > $OUT/load-table.tsv
for dir in $W/lib/*/; do
  l=$(basename $dir); lib=$(ls $dir/libcupti.so.* | head -1)
  probe $l $dir:$TK $lib
done
[ -d /usr/local/cuda/compat ] && probe compat+toolkit /usr/local/cuda/compat:$W/lib/toolkit:$TK $(ls $W/lib/toolkit/libcupti.so.* | head -1)
[ -d /usr/local/cuda/compat ] && [ -d $W/lib/12.8.90 ] && probe compat+12.8.90 /usr/local/cuda/compat:$W/lib/12.8.90:$TK $W/lib/12.8.90/libcupti.so.12

# The dev split under each CUPTI of $RECORD that loaded.
for l in $RECORD; do
  grep -q "^$l	0	" $OUT/load-table.tsv || { echo "skip $l: did not load" >> $OUT/machine.txt; continue; }
  case $l in compat+*) ld=/usr/local/cuda/compat:$W/lib/${l#compat+}:$TK; lib=$(ls $W/lib/${l#compat+}/libcupti.so.* | head -1);; *) ld=$W/lib/$l:$TK; lib=$(ls $W/lib/$l/libcupti.so.* | head -1);; esac
  c=$W/corpora/$l; S=$(date +%s%N)
  LD_LIBRARY_PATH=$ld CAUSALBENCH_CUPTI_LIB=$lib $B corpus record --suite dev --cases $CASES --out $c > $W/corpora/$l.log 2>&1
  echo "record $l rc=$? $(( ($(date +%s%N) - S) / 1000000 )) ms" >> $OUT/machine.txt
  mv $W/corpora/$l.log $c/recording.log
  (cd $c && for f in *.bundle.json; do gzip -9n "$f"; done)
  du -sh $c >> $OUT/machine.txt
done
tar czf $OUT/corpora.tgz -C $W corpora
cat $OUT/machine.txt; column -t -s '	' $OUT/load-table.tsv | cut -c1-300
