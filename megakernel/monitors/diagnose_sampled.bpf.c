/* The diagnosis program (diagnose.bpf.c) aggregating one task in 8, chosen
 * by the device's sampling hash with the `aggregate-sampled` configuration's
 * seed: the track's budgeted eBPF monitor, `ebpf-sampled`. */
#define SAMPLE_PERIOD 8
#define SAMPLE_SEED 0x5eed
#include "diagnose.bpf.c"
