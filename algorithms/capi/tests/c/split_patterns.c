/* An MPI program that splits communicators the ways real codes do, then
 * uses the results: colors with MPI_UNDEFINED, key ties, reversed keys,
 * repeated splits, splits of splits and of dups, many communicators alive
 * at once, then MPI_Allreduce, MPI_Bcast and point-to-point on each. Rank 0
 * prints one line per rank per step; the output must be identical with and
 * without LD_PRELOAD=libcatena-mpi.so. */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#define KEPT 16

static int me, n;
static MPI_Comm kept[KEPT];
static int nkept;

/* What a rank knows of `comm`: rank, size, the sum of members' world ranks
 * (allreduce), its root's world rank (bcast), and its ring neighbours'
 * world ranks (sendrecv); gathered to rank 0 and printed. */
static void report(const char *step, MPI_Comm comm) {
    long facts[6] = {-1, -1, -1, -1, -1, -1};
    if (comm != MPI_COMM_NULL) {
        int rank, size, root = me;
        long sum, mine = me;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &size);
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, comm);
        MPI_Bcast(&root, 1, MPI_INT, 0, comm);
        int right = (rank + 1) % size, left = (rank + size - 1) % size, from_left;
        MPI_Sendrecv(&me, 1, MPI_INT, right, 7, &from_left, 1, MPI_INT, left, 7, comm,
                     MPI_STATUS_IGNORE);
        facts[0] = rank;
        facts[1] = size;
        facts[2] = sum;
        facts[3] = root;
        facts[4] = from_left;
        facts[5] = 1;
    }
    long *all = me == 0 ? malloc(sizeof facts * n) : NULL;
    MPI_Gather(facts, 6, MPI_LONG, all, 6, MPI_LONG, 0, MPI_COMM_WORLD);
    if (me == 0) {
        for (int q = 0; q < n; q++) {
            long *f = all + 6 * q;
            if (f[5] != 1)
                printf("%s: world %d: no communicator\n", step, q);
            else
                printf("%s: world %d: rank %ld of %ld, sum %ld, root %ld, left %ld\n", step, q,
                       f[0], f[1], f[2], f[3], f[4]);
        }
        free(all);
    }
}

static MPI_Comm split(const char *step, MPI_Comm parent, int color, int key) {
    MPI_Comm comm;
    MPI_Comm_split(parent, color, key, &comm);
    report(step, comm);
    return comm;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    /* Rows and columns of a grid of width 2 (kept alive together). */
    MPI_Comm row = split("rows", MPI_COMM_WORLD, me / 2, me);
    MPI_Comm column = split("columns", MPI_COMM_WORLD, me % 2, -me);
    /* Ties: every key 0, order by parent rank. */
    MPI_Comm ties = split("ties", MPI_COMM_WORLD, me % 3, 0);
    /* MPI_UNDEFINED for every third rank. */
    MPI_Comm some = split("undefined", MPI_COMM_WORLD, me % 3 == 1 ? MPI_UNDEFINED : 0, n - me);
    /* Negative colors other than MPI_UNDEFINED: MPICH takes them as any
     * other color, and so must the interposer. (Open MPI refuses them, as
     * the standard allows: there the color is 2.) */
#ifdef OPEN_MPI
    const int odd_color = 2;
#else
    const int odd_color = -5;
#endif
    MPI_Comm negative = split("negative colors", MPI_COMM_WORLD, me % 3 == 0 ? odd_color : me % 2, me);
    /* A split of a split, and of a dup of one. */
    if (column != MPI_COMM_NULL) {
        int crank;
        MPI_Comm_rank(column, &crank);
        MPI_Comm half = split("column halves", column, crank % 2, crank);
        MPI_Comm dup;
        MPI_Comm_dup(half, &dup);
        MPI_Comm quarter = split("halves of a dup", dup, 0, -crank);
        MPI_Comm_free(&quarter);
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
    }
    /* Repeated splits, many alive at once. */
    for (int i = 0; i < KEPT; i++) {
        char step[32];
        snprintf(step, sizeof step, "repeat %d", i);
        kept[nkept++] = split(step, i % 2 ? MPI_COMM_WORLD : row, (me + i) % 4, (me * 7 + i) % 5);
    }
    for (int i = 0; i < nkept; i++)
        if (kept[i] != MPI_COMM_NULL)
            MPI_Comm_free(&kept[i]);
    if (some != MPI_COMM_NULL)
        MPI_Comm_free(&some);
    MPI_Comm_free(&negative);
    MPI_Comm_free(&ties);
    MPI_Comm_free(&column);
    MPI_Comm_free(&row);
    MPI_Finalize();
    return 0;
}
