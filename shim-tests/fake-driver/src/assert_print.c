/* Device-side assert text, printed like the real driver does: through vfprintf(stdout, ...) called
 * from inside libcuda.so.1 (one line per failing thread), before the error is returned. In C
 * because stable Rust cannot build a va_list. */
#include <stdarg.h>
#include <stdio.h>

static int driver_print(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(stdout, fmt, ap);
    va_end(ap);
    return r;
}

void fakecuda_print_assert(const char *kernel, const char *condition, unsigned thread) {
    /* The real driver also writes other files through the same stdio functions, without a
     * newline: it names its threads by writing /proc/self/task/TID/comm (seen on the H200: the
     * text "cuda-EvtHandlr" ran into the captured assert line). */
    FILE *other = fopen("/dev/null", "w");
    if (other) {
        fwrite("cuda-EvtHandlr", 1, 14, other);
        fclose(other);
    }
    driver_print("%s:%d: %s: block: [%d,%d,%d], thread: [%u,%d,%d] Assertion `%s` failed.\n",
                 "fake_kernels.cu", 42, kernel, 0, 0, 0, thread, 0, 0, condition);
}
