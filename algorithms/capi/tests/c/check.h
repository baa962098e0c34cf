/* The C tests' checks: each counts, and the first that fails names itself
 * and catena's last error and exits non-zero. `me` is the process's rank. */
#ifndef CATENA_TEST_CHECK_H
#define CATENA_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catena.h"

static int me, checks;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        checks++;                                                               \
        if (!(cond)) {                                                          \
            fprintf(stderr, "rank %d: check failed at line %d: ", me, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, " (last error: %s)\n", catena_last_error());        \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

#define OK(call) CHECK((call) == CATENA_SUCCESS, "%s failed", #call)

#define FAILS(call, code)                                                      \
    do {                                                                       \
        int rc_ = (call);                                                      \
        CHECK(rc_ == (code), "%s gave %d (%s), want %s", #call, rc_,           \
              catena_strerror(rc_), #code);                                    \
        CHECK(strlen(catena_last_error()) > 0, "no message after %s", #call);  \
    } while (0)

#endif
