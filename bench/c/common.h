/* Shared by the C references: the same SplitMix64 stream and clock as flatline. */
#ifndef FLATLINE_BENCH_COMMON_H
#define FLATLINE_BENCH_COMMON_H
#include <stdint.h>
#include <time.h>

/* The seed's 64-byte order record, one cache line. */
typedef struct __attribute__((aligned(64))) {
    uint64_t id, price;
    uint32_t size, queue_position, total_at_level;
    uint8_t side, order_type, padding[2];
    uint64_t timestamp_nanos;
    uint8_t reserved[24];
} QueueOrder64;
_Static_assert(sizeof(QueueOrder64) == 64, "QueueOrder64 is one cache line");

#define SLOTS 65536u
#define MASK (SLOTS - 1u)

static inline uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A value in [0, bound) by multiply-shift, as SplitMix64::below in Rust. */
static inline uint64_t below(uint64_t *state, uint64_t bound) {
    return (uint64_t)(((unsigned __int128)splitmix64(state) * bound) >> 64);
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif
