/* C reference of flatline's ops1b loop with its hot fields apart
 * (`flatline bench ops1b --layout soa`, runtime/src/workload/ops1b.rs):
 * queue_position and total_at_level in uint32_t arrays of their own beside
 * the 64-byte records, which the loop does not touch.
 * Build: gcc -O3 -mavx2 -o ops1b_soa ops1b_soa.c      Run: ./ops1b_soa [OPS]
 * Prints one JSON line: {"ops":..,"elapsed_ns":..,"checksum":..}. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
    uint64_t ops = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000000ull;
    uint32_t *pos = aligned_alloc(64, SLOTS * sizeof(uint32_t));
    uint32_t *tot = aligned_alloc(64, SLOTS * sizeof(uint32_t));
    QueueOrder64 *records = aligned_alloc(64, SLOTS * sizeof(QueueOrder64));
    if (!pos || !tot || !records) return 1;
    memset(records, 0, SLOTS * sizeof(QueueOrder64));
    for (uint32_t i = 0; i < SLOTS; i++) {
        records[i].id = i;
        pos[i] = 100 + i % 10;
        tot[i] = 50;
    }
    uint64_t sum = 0;
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        uint32_t k = (uint32_t)(i & MASK);
        uint32_t q = pos[k];
        q = q <= 1 ? tot[k] : q - 1;
        pos[k] = q;
        sum += q;
        __asm__ __volatile__("" : : "r"(pos) : "memory"); /* per-op compiler barrier */
    }
    uint64_t t1 = now_ns();
    printf("{\"ops\":%" PRIu64 ",\"elapsed_ns\":%" PRIu64 ",\"checksum\":%" PRIu64 "}\n", ops, t1 - t0, sum);
    free(records);
    free(tot);
    free(pos);
    return 0;
}
