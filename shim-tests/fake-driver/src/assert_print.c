/* Device-side assert text, printed like the real driver does: through vfprintf(stdout, ...) called
 * from inside libcuda.so.1 (one line per failing thread), before the error is returned; the line
 * of an even thread goes through __vfprintf_chk instead. In C
 * because stable Rust cannot build a va_list. */
#include <stdarg.h>
#include <stdio.h>

/* glibc's fortified vfprintf: what a vfprintf call compiles to under _FORTIFY_SOURCE. */
extern int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap);

/* `fortified`: through __vfprintf_chk, as a driver built with _FORTIFY_SOURCE prints, so that
 * cudablame's hooks of both functions are exercised (one assert line each). */
static int driver_print(int fortified, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = fortified ? __vfprintf_chk(stdout, 1, fmt, ap) : vfprintf(stdout, fmt, ap);
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
    driver_print(thread % 2 == 0, "%s:%d: %s: block: [%d,%d,%d], thread: [%u,%d,%d] Assertion `%s` failed.\n",
                 "fake_kernels.cu", 42, kernel, 0, 0, 0, thread, 0, 0, condition);
}
