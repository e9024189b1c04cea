/* The library dlopen_later.c loads late: each call keeps 64 KiB. */
#include <stdlib.h>
#include <string.h>

/* Exported, so the compiler keeps every block (and its malloc). */
void *leak_later_held[4096];
unsigned long leak_later_n;

unsigned long leak_later(void) {
    void *p = malloc(64 << 10);
    memset(p, 1, 64 << 10);
    if (leak_later_n < 4096)
        leak_later_held[leak_later_n++] = p;
    return leak_later_n;
}
