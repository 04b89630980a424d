#!/usr/bin/env bash
# How this directory was recorded on the H200 (one `run` call, 2026-12-04 17:26 UTC;
# machine.txt: nvidia-smi, driver, CPU, the binary's sha256 and commit):
#   release binary built from the working tree at commit 58e35e6
#   (`CARGO_TARGET_DIR=/tmp/mk38-target cargo build --release -p causalbench`,
#   stripped, gzip'd into .gpu/mk38/), then on the device machine
MK_COMMIT=58e35e6 MK_BPF_TIMEOUT=200 MK_RUN_TIMEOUT=110 MK_RUN_BUDGET_S=80 \
  exec bash scripts/measure/h200_megakernel_compiled.sh
# and $OUT/mkcompiled.tgz unpacked here as it came back (the track's case packs,
# removed by the script before packing, are not kept). Nothing in this directory
# was edited.
