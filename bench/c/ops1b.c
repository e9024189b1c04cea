/* C reference of flatline's ops1b loop (runtime/arena/src/workload/ops1b.rs).
 * Build: gcc -O3 -mavx2 -o ops1b ops1b.c      Run: ./ops1b [OPS]
 * Prints one JSON line: {"ops":..,"elapsed_ns":..,"checksum":..}. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
    uint64_t ops = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000000ull;
    QueueOrder64 *ring = aligned_alloc(64, SLOTS * sizeof(QueueOrder64));
    if (!ring) return 1;
    memset(ring, 0, SLOTS * sizeof(QueueOrder64));
    for (uint32_t i = 0; i < SLOTS; i++) {
        ring[i].id = i;
        ring[i].queue_position = 100 + i % 10;
        ring[i].total_at_level = 50;
    }
    uint64_t sum = 0;
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        QueueOrder64 *o = &ring[i & MASK];
        uint32_t q = o->queue_position;
        q = q <= 1 ? o->total_at_level : q - 1;
        o->queue_position = q;
        sum += q;
        __asm__ __volatile__("" : : "r"(ring) : "memory"); /* per-op compiler barrier */
    }
    uint64_t t1 = now_ns();
    printf("{\"ops\":%" PRIu64 ",\"elapsed_ns\":%" PRIu64 ",\"checksum\":%" PRIu64 "}\n", ops, t1 - t0, sum);
    free(ring);
    return 0;
}
