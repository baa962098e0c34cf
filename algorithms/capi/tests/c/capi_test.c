/* Every function of catena.h on a job of any size, against references
 * computed here (and, built with -DWITH_MPI under mpiexec, against MPICH's
 * own MPI_Comm_split in the same program); misuse must give error codes.
 * Exits non-zero, naming the first failed check. */
#include "check.h"
#ifdef WITH_MPI
#include <mpi.h>
#endif

static int n;

/* The reference split: rank and size of `r` among the members of its color,
 * ordered by (key, parent rank). */
static void reference_split(int r, const long *color, const long *key,
                            int *rank, int *size) {
    *rank = 0;
    *size = 0;
    for (int q = 0; q < n; q++) {
        if (color[q] != color[r])
            continue;
        (*size)++;
        if (key[q] < key[r] || (key[q] == key[r] && q < r))
            (*rank)++;
    }
}

/* Checks a communicator a member created (group rank `rank` of `k`, the
 * members' world ranks summing to `list_sum`), then frees it. */
static void check_created(catena_comm_t **made, int rank, int k, long list_sum,
                          const char *what) {
    int made_rank, made_size;
    long mine = me, sum;
    CHECK(*made != NULL, "%s: a member got no communicator", what);
    OK(catena_comm_rank(*made, &made_rank));
    OK(catena_comm_size(*made, &made_size));
    CHECK(made_rank == rank && made_size == k, "%s: %d of %d", what, made_rank, made_size);
    OK(catena_allreduce(*made, &mine, &sum, 1, CATENA_INT64, CATENA_SUM));
    CHECK(sum == list_sum, "%s: sum %ld, want %ld", what, sum, list_sum);
    OK(catena_comm_free(made));
}

/* Checks `got` (this rank's result of a split with these colors and keys of
 * every parent rank) against the reference, member by member. */
static void check_split(catena_comm_t *got, const long *color, const long *key,
                        const char *what) {
    if (color[me] == CATENA_UNDEFINED) {
        CHECK(got == NULL, "%s: a non-member got a communicator", what);
        return;
    }
    int rank, size, want_rank, want_size;
    CHECK(got != NULL, "%s: a member got none", what);
    OK(catena_comm_rank(got, &rank));
    OK(catena_comm_size(got, &size));
    reference_split(me, color, key, &want_rank, &want_size);
    CHECK(rank == want_rank && size == want_size, "%s: rank %d of %d, want %d of %d",
          what, rank, size, want_rank, want_size);
    /* Collective over the new group's members where its map is not held. */
    OK(catena_comm_load_group_map(got));
    for (int q = 0; q < n; q++) {
        int q_rank, q_size, world, in_new;
        if (color[q] != color[me])
            continue;
        reference_split(q, color, key, &q_rank, &q_size);
        OK(catena_comm_world_rank(got, q_rank, &world));
        CHECK(world == q, "%s: rank %d is world %d, want %d", what, q_rank, world, q);
        OK(catena_comm_group_rank(got, q, &in_new));
        CHECK(in_new == q_rank, "%s: world %d is rank %d, want %d", what, q, in_new, q_rank);
    }
    for (int q = 0; q < n; q++) {
        int in_new;
        if (color[q] == color[me])
            continue;
        OK(catena_comm_group_rank(got, q, &in_new));
        CHECK(in_new == CATENA_UNDEFINED, "%s: world %d is a member", what, q);
    }
}

#ifdef WITH_MPI
/* MPICH's MPI_Comm_split with the same arguments must agree, member by member. */
static void check_against_mpich(catena_comm_t *got, const long *color, const long *key,
                                const char *what) {
    MPI_Comm mpi;
    int c = color[me] == CATENA_UNDEFINED ? MPI_UNDEFINED : (int)color[me];
    MPI_Comm_split(MPI_COMM_WORLD, c, (int)key[me], &mpi);
    CHECK((mpi == MPI_COMM_NULL) == (got == NULL), "%s: membership differs from MPICH", what);
    if (mpi == MPI_COMM_NULL)
        return;
    int rank, size, mrank, msize;
    OK(catena_comm_rank(got, &rank));
    OK(catena_comm_size(got, &size));
    MPI_Comm_rank(mpi, &mrank);
    MPI_Comm_size(mpi, &msize);
    CHECK(rank == mrank && size == msize, "%s: %d of %d, MPICH %d of %d", what, rank, size,
          mrank, msize);
    MPI_Group world_group, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Comm_group(mpi, &group);
    OK(catena_comm_load_group_map(got));
    for (int r = 0; r < size; r++) {
        int world, mworld;
        OK(catena_comm_world_rank(got, r, &world));
        MPI_Group_translate_ranks(group, 1, &r, world_group, &mworld);
        CHECK(world == mworld, "%s: rank %d is world %d, MPICH says %d", what, r, world, mworld);
    }
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&mpi);
}
#else
#define check_against_mpich(got, color, key, what) ((void)0)
#endif

struct pair {
    int first, last;
};

/* Not commutative: keeps the lower ranks' first and the higher ranks' last. */
static void first_and_last(const void *in, void *inout, size_t count, void *ctx) {
    const struct pair *a = in;
    struct pair *b = inout;
    (void)ctx;
    for (size_t i = 0; i < count; i++)
        b[i].first = a[i].first;
}

struct parcel {
    int target, from, seq;
};

/* Each parcel says where it goes; seq 0 is dropped. */
static int to_its_target(const void *element, void *ctx) {
    const struct parcel *p = element;
    (void)ctx;
    return p->seq == 0 ? -1 : p->target;
}

/* to_its_target over a whole send buffer; a context, when set, is the rc
 * to return after filling the targets, or (if negative) a target to put
 * on every element. */
static int batch_to_targets(const void *elements, size_t count, int32_t *targets, void *ctx) {
    const struct parcel *p = elements;
    for (size_t i = 0; i < count; i++)
        targets[i] = p[i].seq == 0 ? -1 : p[i].target;
    if (ctx == NULL)
        return 0;
    int how = *(int *)ctx;
    if (how < 0)
        for (size_t i = 0; i < count; i++)
            targets[i] = -how;
    return how < 0 ? 0 : how;
}

/* What a visiting exchange handed over, piece by piece; a visit fails
 * with `fail` when it is set, or when more comes than there is room for. */
struct visited {
    struct parcel *got;
    size_t len, cap, pieces;
    int fail, nested_rc;
};

static int collect(const void *elements, size_t count, void *ctx) {
    struct visited *v = ctx;
    v->nested_rc = catena_barrier(NULL);
    if (v->fail)
        return v->fail;
    if (count == 0 || v->len + count > v->cap)
        return 99;
    memcpy(v->got + v->len, elements, count * sizeof *v->got);
    v->len += count;
    v->pieces++;
    return 0;
}

static int out_of_range(const void *element, void *ctx) {
    (void)element;
    return *(int *)ctx;
}

/* A plan's route: parcel i goes to i mod n as is, and every third one
 * also goes, marked modified (from = -1 - from), to the next rank; seq 0
 * is dropped. The context, when set, makes it fail or keep the emitter. */
struct emit_ctx {
    int fail;
    catena_emit_t *kept;
    int nested_rc;
};

static int to_target_and_next(const void *element, catena_emit_t *emit, void *ctx) {
    const struct parcel *p = element;
    struct emit_ctx *c = ctx;
    if (c != NULL) {
        c->kept = emit;
        c->nested_rc = catena_barrier(NULL);
        if (c->fail)
            return c->fail;
    }
    if (p->seq == 0)
        return 0;
    if (catena_emit_to(emit, p->target) != CATENA_SUCCESS)
        return 1;
    if (p->seq % 3 == 0) {
        struct parcel copy = {(p->target + 1) % n, -1 - p->from, p->seq};
        if (catena_emit_modified(emit, copy.target, &copy) != CATENA_SUCCESS)
            return 2;
    }
    return 0;
}

/* The parcels `to_target_and_next` delivers here, in stable order: sources
 * in rank order, each source's in send order, an element's copies in
 * emission order. */
static size_t expected_parcels(int count, int seq_base, struct parcel *want) {
    size_t k = 0;
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++) {
            int seq = seq_base + i;
            if (seq == 0)
                continue;
            if (i % n == me)
                want[k++] = (struct parcel){me, q, seq};
            if (seq % 3 == 0 && (i % n + 1) % n == me)
                want[k++] = (struct parcel){me, -1 - q, seq};
        }
    return k;
}

static int parcel_order(const void *a, const void *b) {
    const struct parcel *x = a, *y = b;
    if (x->from != y->from)
        return (x->from > y->from) - (x->from < y->from);
    return (x->seq > y->seq) - (x->seq < y->seq);
}

struct record {
    int weight, id;
};

/* Heavier first; the context counts calls. */
static int heavier_first(const void *a, const void *b, void *ctx) {
    const struct record *x = a, *y = b;
    ++*(long *)ctx;
    return (y->weight > x->weight) - (y->weight < x->weight);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    catena_comm_t *world, *again, *sub, *dup;
    int flag;

    /* Before init: state errors, not crashes. */
    FAILS(catena_comm_world(&world), CATENA_ERR_STATE);
    OK(catena_initialized(&flag));
    CHECK(flag == 0, "initialized before catena_init");
    FAILS(catena_init_mpi(NULL), CATENA_ERR_ARG);
#ifndef WITH_MPI
    /* Without MPI running (or built in) there is no communicator to join. */
    int not_a_comm = 0;
    FAILS(catena_init_mpi(&not_a_comm), CATENA_ERR_UNAVAILABLE);
#endif
    OK(catena_init());
    FAILS(catena_init(), CATENA_ERR_STATE);
    OK(catena_initialized(&flag));
    CHECK(flag == 1, "not initialized after catena_init");

    OK(catena_comm_world(&world));
    OK(catena_comm_world(&again));
    CHECK(world == again, "two world handles");
    OK(catena_comm_rank(world, &me));
    OK(catena_comm_size(world, &n));
    CHECK(0 <= me && me < n, "rank %d of %d", me, n);
#ifdef WITH_MPI
    {
        int mrank, msize;
        MPI_Comm_rank(MPI_COMM_WORLD, &mrank);
        MPI_Comm_size(MPI_COMM_WORLD, &msize);
        CHECK(mrank == me && msize == n, "world %d of %d, MPI %d of %d", me, n, mrank, msize);
    }
#endif

    long *color = calloc(n, sizeof(long)), *key = calloc(n, sizeof(long));

    /* Integer colors and reversed keys; then MPI_UNDEFINED and key ties. */
    for (int q = 0; q < n; q++) {
        color[q] = q % 3;
        key[q] = n - q;
    }
    OK(catena_comm_split(world, color[me], key[me], &sub));
    check_split(sub, color, key, "split mod 3");
    check_against_mpich(sub, color, key, "split mod 3");
    OK(catena_comm_free(&sub));
    CHECK(sub == NULL, "free did not clear the handle");

    for (int q = 0; q < n; q++) {
        color[q] = q == 0 ? CATENA_UNDEFINED : q % 2;
        key[q] = 0;
    }
    OK(catena_comm_split(world, color[me], key[me], &sub));
    check_split(sub, color, key, "undefined and ties");
    check_against_mpich(sub, color, key, "undefined and ties");

    /* A split of a split, every algorithm by name: the same result. */
    if (sub != NULL) {
        static const char *names[] = {"Auto", "AllgatherGroup", "GatherScatter", "cheng128",
                                      "Bitonic", "Radix", "Hash", "HASH64"};
        int sub_rank, sub_size;
        OK(catena_comm_rank(sub, &sub_rank));
        OK(catena_comm_size(sub, &sub_size));
        for (size_t a = 0; a < sizeof names / sizeof *names; a++) {
            catena_comm_t *half;
            int rank, size;
            OK(catena_comm_set_algorithm(sub, names[a]));
            OK(catena_comm_split(sub, sub_rank % 2, -sub_rank, &half));
            OK(catena_comm_rank(half, &rank));
            OK(catena_comm_size(half, &size));
            int want_size = (sub_size - sub_rank % 2 + 1) / 2;
            int want_rank = want_size - 1 - sub_rank / 2;
            CHECK(rank == want_rank && size == want_size, "%s: %d of %d, want %d of %d",
                  names[a], rank, size, want_rank, want_size);
            OK(catena_comm_free(&half));
        }
        FAILS(catena_comm_set_algorithm(sub, "Quicksort"), CATENA_ERR_ARG);
        FAILS(catena_comm_set_algorithm(sub, NULL), CATENA_ERR_ARG);
        OK(catena_comm_free(&sub));
    }

    /* Byte-string colors. */
    {
        const char *name = me % 2 ? "odd ranks" : "even";
        for (int q = 0; q < n; q++) {
            color[q] = q % 2;
            key[q] = q;
        }
        OK(catena_comm_split_bytes(world, name, strlen(name), me, &sub));
        check_split(sub, color, key, "byte colors");
        OK(catena_comm_free(&sub));
        OK(catena_comm_split_bytes(world, NULL, 0, me, &sub));
        CHECK(sub == NULL, "a NULL byte color joined a group");
    }

    /* A user comparator: heavier first, ties by rank. */
    {
        struct record mine = {me % 4, me};
        long calls = 0;
        for (int q = 0; q < n; q++) {
            color[q] = 7;
            key[q] = -(q % 4);
        }
        OK(catena_comm_split_compare(world, "all", 3, &mine, sizeof mine, heavier_first, &calls,
                                     &sub));
        check_split(sub, color, key, "comparator");
        long all_calls;
        OK(catena_allreduce(world, &calls, &all_calls, 1, CATENA_INT64, CATENA_SUM));
        CHECK(n == 1 || all_calls > 0, "the comparator was never called");
        OK(catena_comm_free(&sub));
        FAILS(catena_comm_split_compare(world, "all", 3, &mine, sizeof mine, NULL, NULL, &sub),
              CATENA_ERR_ARG);
    }

    /* dup, and handles misused. */
    {
        int rank, size;
        OK(catena_comm_dup(world, &dup));
        OK(catena_comm_rank(dup, &rank));
        OK(catena_comm_size(dup, &size));
        CHECK(rank == me && size == n, "dup: %d of %d", rank, size);
        catena_comm_t *stale = dup;
        OK(catena_comm_free(&dup));
        FAILS(catena_comm_free(&stale), CATENA_ERR_HANDLE);
        FAILS(catena_comm_rank(stale, &rank), CATENA_ERR_HANDLE);
        FAILS(catena_barrier(stale), CATENA_ERR_HANDLE);
        catena_comm_t *forged = (catena_comm_t *)(uintptr_t)0x123456789abcULL;
        FAILS(catena_comm_size(forged, &size), CATENA_ERR_HANDLE);
        FAILS(catena_comm_rank(NULL, &rank), CATENA_ERR_ARG);
        FAILS(catena_comm_rank(world, NULL), CATENA_ERR_ARG);
        FAILS(catena_comm_free(NULL), CATENA_ERR_ARG);
        catena_comm_t *null_comm = NULL;
        FAILS(catena_comm_free(&null_comm), CATENA_ERR_ARG);
        catena_comm_t *world_copy = world;
        FAILS(catena_comm_free(&world_copy), CATENA_ERR_ARG);
        FAILS(catena_comm_load_group_map(NULL), CATENA_ERR_ARG);
        FAILS(catena_comm_world_rank(world, n, &rank), CATENA_ERR_ARG);
        FAILS(catena_comm_world_rank(world, -1, &rank), CATENA_ERR_ARG);
        FAILS(catena_comm_set_timeout(world, -1.0), CATENA_ERR_ARG);
        CHECK(strcmp(catena_strerror(CATENA_ERR_HANDLE), "invalid handle") == 0, "strerror");
    }

    /* Group maps, and a communicator made by a group's members alone. */
    {
        catena_group_t *top, *ranged, *all, *bad;
        int *list = calloc(n, sizeof(int)), k = 0, size, world_rank, rank;
        long list_sum = 0;
        for (int q = n - 1; q >= 0; q -= 2) {
            list_sum += q;
            list[k++] = q;
        }
        OK(catena_group_from_ranks(list, k, CATENA_STRATEGY_AUTO, &top));
        int triple[1][3] = {{n - 1, 0, -2}};
        OK(catena_group_from_ranges(triple, 1, CATENA_STRATEGY_SPACE, &ranged));
        OK(catena_group_from_stride(0, 1, n, CATENA_STRATEGY_TIME, &all));
        OK(catena_group_size(top, &size));
        CHECK(size == k, "group size %d, want %d", size, k);
        for (int g = 0; g < k; g++) {
            OK(catena_group_world_rank(top, g, &world_rank));
            CHECK(world_rank == list[g], "group rank %d is world %d", g, world_rank);
            OK(catena_group_world_rank(ranged, g, &world_rank));
            CHECK(world_rank == list[g], "range group rank %d is world %d", g, world_rank);
        }
        for (int q = 0; q < n; q++) {
            OK(catena_group_rank(top, q, &rank));
            int want = (n - 1 - q) % 2 == 0 ? (n - 1 - q) / 2 : CATENA_UNDEFINED;
            CHECK(rank == want, "world %d has group rank %d, want %d", q, rank, want);
            OK(catena_group_rank(all, q, &rank));
            CHECK(rank == q, "world %d in the stride group", q);
        }
        size_t bytes;
        OK(catena_group_bytes(all, &bytes));
        CHECK(bytes <= 64, "a stride group takes %zu bytes", bytes);
        OK(catena_group_rank(top, me, &rank));
        if (rank != CATENA_UNDEFINED) {
            catena_comm_t *made;
            OK(catena_comm_create_group(world, top, 5, &made));
            check_created(&made, rank, k, list_sum, "create_group");
            /* Posted, with another tag: the same group again. */
            catena_request_t *made_req;
            OK(catena_comm_create_group_post(world, top, 6, &made, &made_req));
            OK(catena_request_wait(&made_req));
            check_created(&made, rank, k, list_sum, "posted create_group");
        }
        OK(catena_barrier(world));
        /* Misuse: every one an error on this process alone. */
        int twice[2] = {0, 0}, outside = n;
        if (n > 1)
            FAILS(catena_group_from_ranks(twice, 2, CATENA_STRATEGY_AUTO, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_from_ranks(&outside, 1, CATENA_STRATEGY_AUTO, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_from_ranks(list, -1, CATENA_STRATEGY_AUTO, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_from_ranks(NULL, 2, CATENA_STRATEGY_AUTO, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_from_ranks(list, k, 9, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_from_stride(0, 0, 2, CATENA_STRATEGY_AUTO, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_from_stride(0, -1, 2, CATENA_STRATEGY_AUTO, &bad), CATENA_ERR_ARG);
        FAILS(catena_group_world_rank(top, k, &world_rank), CATENA_ERR_ARG);
        FAILS(catena_comm_create_group(world, top, CATENA_CREATE_TAGS, &sub), CATENA_ERR_ARG);
        FAILS(catena_group_size((catena_group_t *)world, &size), CATENA_ERR_HANDLE);
        FAILS(catena_comm_create_group(world, NULL, 5, &sub), CATENA_ERR_ARG);
        catena_request_t *no_req;
        FAILS(catena_comm_create_group_post(world, NULL, 5, &sub, &no_req), CATENA_ERR_ARG);
        FAILS(catena_comm_create_group_post(world, top, CATENA_CREATE_TAGS, &sub, &no_req),
              CATENA_ERR_ARG);
        catena_group_t *stale = all;
        OK(catena_group_free(&all));
        CHECK(all == NULL, "group free did not clear the handle");
        FAILS(catena_group_free(&stale), CATENA_ERR_HANDLE);
        FAILS(catena_group_rank(stale, 0, &rank), CATENA_ERR_HANDLE);
        OK(catena_group_free(&ranged));
        OK(catena_group_free(&top));
        free(list);
    }

    /* Collectives. */
    OK(catena_barrier(world));
    {
        char buffer[100];
        for (int i = 0; i < 100; i++)
            buffer[i] = me == n - 1 ? (char)(i * 7) : 0;
        OK(catena_bcast(world, buffer, sizeof buffer, n - 1));
        for (int i = 0; i < 100; i++)
            CHECK(buffer[i] == (char)(i * 7), "bcast byte %d", i);
        FAILS(catena_bcast(world, buffer, sizeof buffer, n), CATENA_ERR_ARG);
        FAILS(catena_bcast(world, NULL, 8, 0), CATENA_ERR_ARG);
    }
    {
        int32_t in[3] = {me, -me, 1}, out[3];
        OK(catena_allreduce(world, in, out, 3, CATENA_INT32, CATENA_SUM));
        CHECK(out[0] == n * (n - 1) / 2 && out[1] == -out[0] && out[2] == n, "int32 sum");
        OK(catena_allreduce(world, in, out, 3, CATENA_INT32, CATENA_MAX));
        CHECK(out[0] == n - 1 && out[1] == 0 && out[2] == 1, "int32 max");
        double x = 0.5 * me, sum;
        OK(catena_allreduce(world, &x, &sum, 1, CATENA_DOUBLE, CATENA_SUM));
        CHECK(sum == 0.25 * n * (n - 1), "double sum %g", sum);
        uint8_t bits = (uint8_t)(1u << (me % 8)), all;
        OK(catena_allreduce(world, &bits, &all, 1, CATENA_UINT8, CATENA_BOR));
        CHECK(all == (uint8_t)((n >= 8) ? 0xff : (1u << n) - 1), "uint8 bor %x", all);
        int64_t big = me + 1, product = 0;
        OK(catena_reduce(world, &big, &product, 1, CATENA_INT64, CATENA_PROD, 0));
        if (me == 0) {
            int64_t want = 1;
            for (int q = 1; q <= n; q++)
                want *= q;
            CHECK(product == want, "int64 prod at the root");
        }
        FAILS(catena_allreduce(world, &x, &sum, 1, CATENA_DOUBLE, CATENA_BXOR), CATENA_ERR_ARG);
        FAILS(catena_allreduce(world, &x, &sum, 1, 42, CATENA_SUM), CATENA_ERR_ARG);
        FAILS(catena_allreduce(world, &x, &sum, (size_t)-1, CATENA_DOUBLE, CATENA_SUM),
              CATENA_ERR_ARG);
        /* Members that disagree on the count: every member gets the error. */
        int32_t wide[2] = {1, 1}, wide_out[2];
        if (n > 1)
            FAILS(catena_allreduce(world, wide, wide_out, me == 0 ? 2 : 1, CATENA_INT32,
                                   CATENA_SUM),
                  CATENA_ERR_MISMATCH);
    }
    {
        struct pair mine = {me, me}, result;
        OK(catena_allreduce_user(world, &mine, &result, 1, sizeof mine, first_and_last, NULL));
        CHECK(result.first == 0 && result.last == n - 1, "user op order: %d %d", result.first,
              result.last);
        OK(catena_reduce_user(world, &mine, &result, 1, sizeof mine, first_and_last, NULL,
                              n - 1));
        FAILS(catena_allreduce_user(world, &mine, &result, 1, 0, first_and_last, NULL),
              CATENA_ERR_ARG);
        FAILS(catena_allreduce_user(world, &mine, &result, 1, sizeof mine, NULL, NULL),
              CATENA_ERR_ARG);
    }
    {
        int pair[2] = {me, me * me};
        int *all = calloc(2 * n, sizeof(int));
        OK(catena_allgather(world, pair, sizeof pair, all));
        for (int q = 0; q < n; q++)
            CHECK(all[2 * q] == q && all[2 * q + 1] == q * q, "allgather from %d", q);
        memset(all, 0, 2 * n * sizeof(int));
        OK(catena_gather(world, pair, sizeof pair, me == 0 ? all : NULL, 0));
        if (me == 0)
            for (int q = 0; q < n; q++)
                CHECK(all[2 * q] == q && all[2 * q + 1] == q * q, "gather from %d", q);
        free(all);
    }

    /* Nonblocking: a split, an allreduce, a bcast and a barrier posted in
     * the same order everywhere, tested to completion in the reverse one. */
    {
        catena_request_t *reqs[4], *req = NULL;
        catena_comm_t *half = NULL;
        int32_t mine[2] = {me, 1}, sums[2] = {0, 0};
        char message[16] = {0};
        int done, left = 4;
        if (me == 0)
            strcpy(message, "posted bcast");
        OK(catena_comm_split_post(world, me % 2, -me, &half, &reqs[0]));
        OK(catena_allreduce_post(world, mine, sums, 2, CATENA_INT32, CATENA_SUM, &reqs[1]));
        OK(catena_bcast_post(world, message, sizeof message, 0, &reqs[2]));
        OK(catena_barrier_post(world, &reqs[3]));
        while (left > 0)
            for (int r = 3; r >= 0; r--) {
                if (reqs[r] == NULL)
                    continue;
                OK(catena_request_test(&reqs[r], &done));
                if (done) {
                    CHECK(reqs[r] == NULL, "a done request was not cleared");
                    left--;
                }
            }
        CHECK(sums[0] == n * (n - 1) / 2 && sums[1] == n, "posted allreduce: %d %d", sums[0],
              sums[1]);
        CHECK(strcmp(message, "posted bcast") == 0, "posted bcast: %s", message);
        for (int q = 0; q < n; q++) {
            color[q] = q % 2;
            key[q] = -q;
        }
        check_split(half, color, key, "posted split");
        OK(catena_comm_free(&half));
        /* The rest of the posted collectives, waited for in reverse order: a wait
         * progresses every request (on a communicator in host memory the calls run
         * in post order). */
        {
            catena_request_t *more[5];
            int64_t factor = me + 1, product = 0;
            struct pair pair = {me, me}, first_last = {-1, -1}, at_root = {-1, -1};
            int *all = calloc(n, sizeof(int)), *gathered = calloc(n, sizeof(int));
            OK(catena_reduce_post(world, &factor, &product, 1, CATENA_INT64, CATENA_PROD, n - 1,
                                  &more[0]));
            OK(catena_allreduce_user_post(world, &pair, &first_last, 1, sizeof pair,
                                          first_and_last, NULL, &more[1]));
            OK(catena_reduce_user_post(world, &pair, &at_root, 1, sizeof pair, first_and_last,
                                       NULL, 0, &more[2]));
            OK(catena_allgather_post(world, &me, sizeof me, all, &more[3]));
            OK(catena_gather_post(world, &me, sizeof me, me == 0 ? gathered : NULL, 0, &more[4]));
            for (int r = 4; r >= 0; r--)
                OK(catena_request_wait(&more[r]));
            if (me == n - 1) {
                int64_t want = 1;
                for (int q = 1; q <= n; q++)
                    want *= q;
                CHECK(product == want, "posted reduce at the root");
            }
            CHECK(first_last.first == 0 && first_last.last == n - 1, "posted user allreduce");
            if (me == 0)
                CHECK(at_root.first == 0 && at_root.last == n - 1, "posted user reduce");
            for (int q = 0; q < n; q++) {
                CHECK(all[q] == q, "posted allgather from %d", q);
                if (me == 0)
                    CHECK(gathered[q] == q, "posted gather from %d", q);
            }
            free(all);
            free(gathered);
        }
        OK(catena_barrier_post(world, &req));
        OK(catena_request_wait(&req));
        CHECK(req == NULL, "a waited request was not cleared");
        /* Misuse. */
        FAILS(catena_request_test(&req, &done), CATENA_ERR_ARG);
        FAILS(catena_request_test(NULL, &done), CATENA_ERR_ARG);
        catena_request_t *forged = (catena_request_t *)(uintptr_t)0x5555000011ULL;
        FAILS(catena_request_wait(&forged), CATENA_ERR_HANDLE);
        FAILS(catena_comm_split_post(world, 0, 0, NULL, &req), CATENA_ERR_ARG);
        FAILS(catena_bcast_post(world, message, sizeof message, n, &req), CATENA_ERR_ARG);
        OK(catena_barrier_post(world, &req));
        FAILS(catena_finalize(), CATENA_ERR_STATE);
        OK(catena_request_wait(&req));
    }

    /* alltoall_specific: parcel i of every rank goes to rank i mod n,
     * except seq 0, which is dropped; too little room, a target outside
     * the group and an unsupported size fail on every member. */
    {
        int count = 3 * n;
        struct parcel *out = calloc(count, sizeof *out), *in = calloc(count, sizeof *in);
        size_t received = 0;
        for (int i = 0; i < count; i++)
            out[i] = (struct parcel){i % n, me, i};
        OK(catena_alltoall_specific(world, out, count, sizeof *out, to_its_target, NULL, in,
                                    count, &received));
        /* From each rank q: seqs me, me + n, me + 2n, minus seq 0 from all. */
        size_t want = (size_t)n * (me == 0 ? 2 : 3);
        CHECK(received == want, "alltoall_specific received %zu, want %zu", received, want);
        int *seen = calloc((size_t)n * count, sizeof(int));
        for (size_t e = 0; e < received; e++) {
            CHECK(in[e].target == me && in[e].from >= 0 && in[e].from < n &&
                      in[e].seq % n == me && in[e].seq != 0,
                  "alltoall_specific delivered %d/%d/%d", in[e].target, in[e].from, in[e].seq);
            CHECK(seen[in[e].from * count + in[e].seq]++ == 0, "a parcel arrived twice");
        }
        free(seen);
        if (n > 1)
            FAILS(catena_alltoall_specific(world, out, count, sizeof *out, to_its_target, NULL,
                                           in, 1, &received),
                  CATENA_ERR_TRUNCATE);
        int far = n;
        FAILS(catena_alltoall_specific(world, out, count, sizeof *out, out_of_range, &far, in,
                                       count, &received),
              CATENA_ERR_ARG);
        FAILS(catena_alltoall_specific(world, out, count, 7, to_its_target, NULL, in, count,
                                       &received),
              CATENA_ERR_ARG);
        FAILS(catena_alltoall_specific(world, out, count, sizeof *out, NULL, NULL, in, count,
                                       &received),
              CATENA_ERR_ARG);
        free(out);
        free(in);
    }

    /* Plans routed by one batch callback deliver what the per-element
     * route does, blocking and posted; a failing callback or a target out
     * of range fails on every member and leaves the plan usable. */
    {
        int count = 3 * n;
        struct parcel *out = calloc(count, sizeof *out), *in = calloc(count, sizeof *in);
        size_t received = 0, want = (size_t)n * (me == 0 ? 2 : 3);
        catena_request_t *req = NULL;
        const char *variants[] = {"alltoallv", "sendrecv", "put", "sort"};
        for (int v = 0; v < 4; v++) {
            catena_alltoall_plan_t *plan = NULL;
            OK(catena_alltoall_plan_create(world, sizeof *out, count, variants[v], 0, &plan));
            for (int round = 0; round < 2; round++) {
                for (int i = 0; i < count; i++)
                    out[i] = (struct parcel){i % n, me, i};
                memset(in, 0xff, count * sizeof *in);
                received = 0;
                if (round == 0) {
                    OK(catena_alltoall_plan_exchange_batch(plan, out, count, batch_to_targets,
                                                           NULL, in, &received));
                } else {
                    OK(catena_alltoall_plan_exchange_batch_post(
                        plan, out, count, batch_to_targets, NULL, in, &received, &req));
                    OK(catena_request_wait(&req));
                }
                CHECK(received == want, "batch plan %s: received %zu, want %zu", variants[v],
                      received, want);
                int *seen = calloc((size_t)n * count, sizeof(int));
                for (size_t e = 0; e < received; e++) {
                    CHECK(in[e].target == me && in[e].from >= 0 && in[e].from < n &&
                              in[e].seq % n == me && in[e].seq != 0,
                          "batch plan %s delivered %d/%d/%d", variants[v], in[e].target,
                          in[e].from, in[e].seq);
                    CHECK(seen[in[e].from * count + in[e].seq]++ == 0,
                          "batch plan %s: a parcel arrived twice", variants[v]);
                }
                free(seen);
            }
            int how = me == 0 ? 7 : 0;
            FAILS(catena_alltoall_plan_exchange_batch(plan, out, count, batch_to_targets, &how,
                                                      in, &received),
                  CATENA_ERR_USER);
            how = -n;
            FAILS(catena_alltoall_plan_exchange_batch(plan, out, count, batch_to_targets, &how,
                                                      in, &received),
                  CATENA_ERR_ARG);
            FAILS(catena_alltoall_plan_exchange_batch(plan, out, count, NULL, NULL, in,
                                                      &received),
                  CATENA_ERR_ARG);
            OK(catena_alltoall_plan_exchange_batch(plan, out, count, batch_to_targets, NULL, in,
                                                   &received));
            CHECK(received == want, "a batch plan after failed calls: %zu", received);
            OK(catena_alltoall_plan_free(&plan));
        }
        free(out);
        free(in);
    }

    /* A visiting exchange hands the parcels to a callback in pieces, with
     * no receive buffer: what the buffered call delivers, by the batch
     * route and by the emitting one, blocking and posted, each compared
     * with the reference; a stable plan and a sort plan refuse it on every
     * member and stay usable; a visit that fails fails its member alone,
     * and the plan goes on. */
    {
        int count = 3 * n;
        struct parcel *out = calloc(count, sizeof *out), *want = calloc(4 * count, sizeof *want);
        struct visited v = {calloc(4 * count, sizeof *v.got), 0, 4 * (size_t)count, 0, 0, 0};
        size_t received = 0;
        catena_request_t *req = NULL;
        catena_alltoall_plan_t *plan = NULL, *stable = NULL, *sort = NULL;
        OK(catena_alltoall_plan_create(world, sizeof *out, 4 * count, "put", 0, &plan));
        for (int form = 0; form < 4; form++) {
            for (int i = 0; i < count; i++)
                out[i] = (struct parcel){i % n, me, i};
            v.len = v.pieces = 0;
            received = 0;
            size_t k;
            if (form < 2) {
                /* By the batch route: parcel i to i mod n, seq 0 dropped. */
                k = 0;
                for (int q = 0; q < n; q++)
                    for (int i = 1; i < count; i++)
                        if (i % n == me)
                            want[k++] = (struct parcel){me, q, i};
                if (form == 0) {
                    OK(catena_alltoall_plan_exchange_batch_visit(
                        plan, out, count, batch_to_targets, NULL, collect, &v, &received));
                } else {
                    OK(catena_alltoall_plan_exchange_batch_visit_post(
                        plan, out, count, batch_to_targets, NULL, collect, &v, &received, &req));
                    OK(catena_request_wait(&req));
                }
            } else {
                k = expected_parcels(count, 0, want);
                if (form == 2) {
                    OK(catena_alltoall_plan_exchange_visit(plan, out, count, to_target_and_next,
                                                           NULL, collect, &v, &received));
                } else {
                    OK(catena_alltoall_plan_exchange_visit_post(plan, out, count,
                                                                to_target_and_next, NULL,
                                                                collect, &v, &received, &req));
                    OK(catena_request_wait(&req));
                }
            }
            CHECK(received == k && v.len == k, "visit form %d: received %zu, visited %zu, want %zu",
                  form, received, v.len, k);
            qsort(v.got, v.len, sizeof *v.got, parcel_order);
            qsort(want, k, sizeof *want, parcel_order);
            CHECK(v.len != k || memcmp(v.got, want, k * sizeof *want) == 0,
                  "visit form %d: other parcels than the reference", form);
            CHECK(k == 0 || v.nested_rc == CATENA_ERR_STATE, "catena called from a visit: %d",
                  v.nested_rc);
        }
        for (int i = 0; i < count; i++)
            out[i] = (struct parcel){i % n, me, i};
        OK(catena_alltoall_plan_create(world, sizeof *out, 4 * count, "put", 1, &stable));
        OK(catena_alltoall_plan_create(world, sizeof *out, 4 * count, "sort", 0, &sort));
        FAILS(catena_alltoall_plan_exchange_batch_visit(stable, out, count, batch_to_targets, NULL,
                                                        collect, &v, &received),
              CATENA_ERR_ARG);
        FAILS(catena_alltoall_plan_exchange_batch_visit(sort, out, count, batch_to_targets, NULL,
                                                        collect, &v, &received),
              CATENA_ERR_ARG);
        FAILS(catena_alltoall_plan_exchange_batch_visit(plan, out, count, batch_to_targets, NULL,
                                                        NULL, NULL, &received),
              CATENA_ERR_ARG);
        struct parcel *in = calloc(4 * count, sizeof *in);
        OK(catena_alltoall_plan_exchange_batch(stable, out, count, batch_to_targets, NULL, in,
                                               &received));
        free(in);
        v.len = 0;
        v.fail = me == 0 ? 5 : 0;
        int rc = catena_alltoall_plan_exchange_batch_visit(plan, out, count, batch_to_targets,
                                                           NULL, collect, &v, &received);
        CHECK(rc == (me == 0 ? CATENA_ERR_USER : CATENA_SUCCESS),
              "a visit failing on rank 0 gave %d here", rc);
        v.len = v.fail = 0;
        OK(catena_alltoall_plan_exchange_batch_visit(plan, out, count, batch_to_targets, NULL,
                                                     collect, &v, &received));
        CHECK(v.len == received && received == (size_t)n * (me == 0 ? 2 : 3),
              "a visit after a failed one: %zu", received);
        OK(catena_alltoall_plan_free(&plan));
        OK(catena_alltoall_plan_free(&stable));
        OK(catena_alltoall_plan_free(&sort));
        free(v.got);
        free(out);
        free(want);
    }

    /* The creation calls' other posted forms, tested in reverse order. */
    {
        catena_request_t *reqs[3];
        catena_comm_t *copy = NULL, *by_name = NULL, *by_weight = NULL;
        const char *name = me % 3 ? "rest" : "thirds";
        struct record mine = {me % 4, me};
        long calls = 0;
        int done, left = 3;
        OK(catena_comm_dup_post(world, &copy, &reqs[0]));
        OK(catena_comm_split_bytes_post(world, name, strlen(name), -me, &by_name, &reqs[1]));
        OK(catena_comm_split_compare_post(world, "all", 3, &mine, sizeof mine, heavier_first,
                                          &calls, &by_weight, &reqs[2]));
        while (left > 0)
            for (int r = 2; r >= 0; r--)
                if (reqs[r] != NULL) {
                    OK(catena_request_test(&reqs[r], &done));
                    left -= done;
                }
        for (int q = 0; q < n; q++) {
            color[q] = q % 3 ? 1 : 0;
            key[q] = -q;
        }
        check_split(by_name, color, key, "posted byte-color split");
        for (int q = 0; q < n; q++) {
            color[q] = 7;
            key[q] = -(q % 4);
        }
        check_split(by_weight, color, key, "posted comparator split");
        for (int q = 0; q < n; q++)
            key[q] = q;
        check_split(copy, color, key, "posted dup");
        OK(catena_comm_free(&copy));
        OK(catena_comm_free(&by_name));
        OK(catena_comm_free(&by_weight));
        FAILS(catena_comm_dup_post(world, NULL, &reqs[0]), CATENA_ERR_ARG);
        FAILS(catena_comm_split_compare_post(world, "all", 3, &mine, sizeof mine, NULL, NULL,
                                             &copy, &reqs[0]),
              CATENA_ERR_ARG);
    }

    /* alltoall_specific posted, and plans of every variant, unordered and
     * stable, each used twice (the second exchange posted), routes that
     * emit several targets and modified copies; results against the
     * sequential reference. */
    {
        int count = 3 * n;
        struct parcel *out = calloc(count, sizeof *out), *in = calloc(4 * count, sizeof *in),
                      *want = calloc(4 * count, sizeof *want);
        size_t received = 0;
        catena_request_t *req = NULL;
        for (int i = 0; i < count; i++)
            out[i] = (struct parcel){i % n, me, i};
        OK(catena_alltoall_specific_post(world, out, count, sizeof *out, to_its_target, NULL, in,
                                         count, &received, &req));
        OK(catena_request_wait(&req));
        CHECK(received == (size_t)n * (me == 0 ? 2 : 3), "posted alltoall_specific: %zu",
              received);

        const char *variants[] = {"auto", "alltoallv", "sendrecv", "put", "put-stable", "sort"};
        for (int v = 0; v < 6; v++)
            for (int stable = 0; stable < 2; stable++) {
                catena_alltoall_plan_t *plan = NULL;
                OK(catena_alltoall_plan_create(world, sizeof *out, 4 * count, variants[v], stable,
                                               &plan));
                for (int round = 0; round < 2; round++) {
                    int base = round * 100;
                    for (int i = 0; i < count; i++)
                        out[i] = (struct parcel){i % n, me, base + i};
                    memset(in, 0xff, 4 * count * sizeof *in);
                    received = 0;
                    if (round == 0) {
                        OK(catena_alltoall_plan_exchange(plan, out, count, to_target_and_next,
                                                         NULL, in, &received));
                    } else {
                        OK(catena_alltoall_plan_exchange_post(plan, out, count,
                                                              to_target_and_next, NULL, in,
                                                              &received, &req));
                        OK(catena_request_wait(&req));
                    }
                    size_t k = expected_parcels(count, base, want);
                    CHECK(received == k, "plan %s/%d: received %zu, want %zu", variants[v],
                          stable, received, k);
                    int ordered = stable || strcmp(variants[v], "alltoallv") == 0 ||
                                  strcmp(variants[v], "put-stable") == 0 ||
                                  strcmp(variants[v], "sort") == 0;
                    if (!ordered) {
                        qsort(in, received, sizeof *in, parcel_order);
                        qsort(want, k, sizeof *want, parcel_order);
                    }
                    CHECK(received != k || memcmp(in, want, k * sizeof *in) == 0,
                          "plan %s/%d round %d: other parcels (or order) than the reference",
                          variants[v], stable, round);
                }
                OK(catena_alltoall_plan_free(&plan));
                CHECK(plan == NULL, "plan free did not clear the handle");
            }

        /* A plan keeps its communicator; misuse fails alike everywhere. */
        {
            catena_comm_t *copy = NULL;
            catena_alltoall_plan_t *plan = NULL;
            struct emit_ctx ctx = {0, NULL, 0};
            OK(catena_comm_dup(world, &copy));
            OK(catena_alltoall_plan_create(copy, sizeof *out, 4 * count, "put", 0, &plan));
            OK(catena_comm_free(&copy));
            for (int i = 0; i < count; i++)
                out[i] = (struct parcel){i % n, me, i};
            OK(catena_alltoall_plan_exchange(plan, out, count, to_target_and_next, &ctx, in,
                                             &received));
            CHECK(received == expected_parcels(count, 0, want), "a plan on a freed dup");
            /* An exchange in flight keeps its plan when the handle is freed. */
            {
                catena_alltoall_plan_t *posted = NULL;
                OK(catena_alltoall_plan_create(world, sizeof *out, 4 * count, "sort", 1, &posted));
                OK(catena_alltoall_plan_exchange_post(posted, out, count, to_target_and_next,
                                                      NULL, in, &received, &req));
                OK(catena_alltoall_plan_free(&posted));
                OK(catena_request_wait(&req));
                CHECK(received == expected_parcels(count, 0, want) &&
                          memcmp(in, want, received * sizeof *in) == 0,
                      "a freed plan's posted exchange");
            }
            CHECK(ctx.nested_rc == CATENA_ERR_STATE, "catena called from a route: %d",
                  ctx.nested_rc);
            FAILS(catena_emit_to(ctx.kept, 0), CATENA_ERR_ARG);
            FAILS(catena_emit_to(NULL, 0), CATENA_ERR_ARG);
            ctx.fail = 5;
            FAILS(catena_alltoall_plan_exchange(plan, out, count, to_target_and_next, &ctx, in,
                                                &received),
                  CATENA_ERR_USER);
            FAILS(catena_alltoall_plan_exchange(plan, out, count, NULL, NULL, in, &received),
                  CATENA_ERR_ARG);
            catena_alltoall_plan_t *stale = plan;
            OK(catena_alltoall_plan_free(&plan));
            FAILS(catena_alltoall_plan_free(&stale), CATENA_ERR_HANDLE);
            FAILS(catena_alltoall_plan_exchange(stale, out, count, to_target_and_next, NULL, in,
                                                &received),
                  CATENA_ERR_HANDLE);
            FAILS(catena_alltoall_plan_exchange((catena_alltoall_plan_t *)world, out, count,
                                                to_target_and_next, NULL, in, &received),
                  CATENA_ERR_HANDLE);
            FAILS(catena_alltoall_plan_create(world, sizeof *out, count, "bogus", 0, &plan),
                  CATENA_ERR_ARG);
            FAILS(catena_alltoall_plan_create(world, 7, count, NULL, 0, &plan), CATENA_ERR_ARG);
            FAILS(catena_alltoall_plan_create(world, sizeof *out, SIZE_MAX, "put", 0, &plan),
                  CATENA_ERR_ARG);
            OK(catena_alltoall_plan_create(world, sizeof *out, SIZE_MAX, "alltoallv", 0, &plan));
            FAILS(catena_alltoall_plan_exchange(plan, out, count, to_target_and_next, NULL, in,
                                                &received),
                  CATENA_ERR_ARG);
            OK(catena_alltoall_plan_free(&plan));
            if (n > 1) {
                OK(catena_alltoall_plan_create(world, sizeof *out, 1, NULL, 0, &plan));
                FAILS(catena_alltoall_plan_exchange(plan, out, count, to_target_and_next, NULL,
                                                    in, &received),
                      CATENA_ERR_TRUNCATE);
                OK(catena_alltoall_plan_free(&plan));
            }
        }
        free(out);
        free(in);
        free(want);
    }

    OK(catena_comm_set_timeout(world, 30.0));
    OK(catena_finalize());
    FAILS(catena_finalize(), CATENA_ERR_STATE);
    FAILS(catena_comm_rank(world, &me), CATENA_ERR_STATE);
    free(color);
    free(key);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    if (me == 0)
        printf("capi_test: %d checks passed on each of %d processes\n", checks, n);
    return 0;
}
