/* check.h — the GPU-free test programs' setup check: a driver call that must succeed, else the
 * program prints `setup_failed=WHAT rc=RC` on stdout and exits with status 3 (the tests then fail
 * showing that line). Include after cuda_min.h (scenarios.c and verdicts.c declare their own
 * driver types and keep their own copy). */
#ifndef CUDABLAME_TEST_CHECK_H
#define CUDABLAME_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static void check(const char *what, CUresult rc) {
    if (rc != 0) {
        printf("setup_failed=%s rc=%u\n", what, rc);
        exit(3);
    }
}

#endif /* CUDABLAME_TEST_CHECK_H */
