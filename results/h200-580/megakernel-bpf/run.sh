#!/usr/bin/env bash
# How this directory was recorded on the H200 (release binary, see machine.txt for its sha256):
# the repository's scripts/measure/h200_megakernel_diagnosis.sh with its two steps bounded,
#   MK_BPF_TIMEOUT=170 MK_RUN_TIMEOUT=110 MK_RUN_BUDGET_S=90 bash scripts/measure/h200_megakernel_diagnosis.sh
# then $OUT/mkdiag.tgz unpacked here.
exec env MK_BPF_TIMEOUT=170 MK_RUN_TIMEOUT=110 MK_RUN_BUDGET_S=90 bash scripts/measure/h200_megakernel_diagnosis.sh
