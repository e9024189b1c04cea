/* Linked beside sites_leak.c (with -rdynamic, so the preloaded library's
 * dlsym finds them), this makes the leak look like a Python the library
 * cannot read: Py_IsInitialized says it is running and Py_GetVersion gives
 * FAKE_VERSION ("3.14.0 (main, …)", "3.13.0 experimental free-threading
 * build (…)"). No frame layout, no _PyRuntime: its sites must be native,
 * and the first sentence must say the line is not known. */
#ifndef FAKE_VERSION
#error "build with -DFAKE_VERSION='\"3.14.0 (main)\"'"
#endif

int Py_IsInitialized(void) { return 1; }

const char *Py_GetVersion(void) { return FAKE_VERSION; }
