/* C reference of flatline's ops1b loop with its hot fields apart
 * (`flatline bench ops1b --layout soa`, runtime/arena/src/workload/ops1b.rs):
 * queue_position and total_at_level in uint32_t arrays of their own beside
 * the 64-byte records, which the loop does not touch. Each chunk of at most
 * SLOTS operations walks the slots as runs (from the chunk's first slot to the
 * ring's end, then from slot 0), as flatline's loop does, instead of masking
 * every operation's index: the same operations in the same order.
 * Build: gcc -O3 -mavx2 -o ops1b_soa ops1b_soa.c      Run: ./ops1b_soa [OPS]
 * Prints one JSON line: {"ops":..,"elapsed_ns":..,"checksum":..}. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

/* One operation on each of n slots in turn, with the per-op barrier. */
static inline uint64_t run_slots(uint32_t *pos, const uint32_t *tot, uint64_t n) {
    uint64_t sum = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint32_t q = pos[k];
        q = q <= 1 ? tot[k] : q - 1;
        pos[k] = q;
        sum += q;
        __asm__ __volatile__("" : : "r"(pos) : "memory"); /* per-op compiler barrier */
    }
    return sum;
}

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
    for (uint64_t done = 0; done < ops;) {
        uint64_t n = ops - done < SLOTS ? ops - done : SLOTS;
        uint32_t start = (uint32_t)(done & MASK);
        uint64_t first = n < SLOTS - start ? n : SLOTS - start;
        sum += run_slots(pos + start, tot + start, first);
        sum += run_slots(pos, tot, n - first);
        done += n;
    }
    uint64_t t1 = now_ns();
    printf("{\"ops\":%" PRIu64 ",\"elapsed_ns\":%" PRIu64 ",\"checksum\":%" PRIu64 "}\n", ops, t1 - t0, sum);
    free(records);
    free(tot);
    free(pos);
    return 0;
}
