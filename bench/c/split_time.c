/* Times MPI_Comm_split on MPI_COMM_WORLD: 5 groups (rank mod 5), reversed
 * keys, REPS times (21 unless given) after WARMUPS warm-ups (3 unless
 * given); prints the median over repetitions of the slowest rank's time.
 * Run it with and without LD_PRELOAD=libcatena-mpi.so to compare MPICH's
 * split with catena's (ci/interposer-figures.sh). MPICH's own split gets
 * faster over its first 50 or so calls in a job (3 to 6 us, then 1.4 to 3
 * at N = 2 on the development VM), so 3 warm-ups time it cold, as a
 * program that splits a few times at start-up sees it; `split_time 200
 * 2001` times both warm.
 * Usage: split_time [WARMUPS [REPS]] */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int me, n, warmups = 3, reps = 21;
    MPI_Init(&argc, &argv);
    if (argc > 1)
        warmups = atoi(argv[1]);
    if (argc > 2)
        reps = atoi(argv[2]);
    double *slowest = malloc(sizeof *slowest * (size_t)(reps > 0 ? reps : 1));
    if (warmups < 0 || reps < 1 || slowest == NULL) {
        fprintf(stderr, "usage: split_time [WARMUPS [REPS]] (REPS at least 1)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int rep = -warmups; rep < reps; rep++) {
        MPI_Comm comm;
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        MPI_Comm_split(MPI_COMM_WORLD, me % 5, n - me, &comm);
        double took = MPI_Wtime() - start, max;
        MPI_Comm_free(&comm);
        MPI_Reduce(&took, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rep >= 0)
            slowest[rep] = max;
    }
    if (me == 0) {
        qsort(slowest, (size_t)reps, sizeof *slowest, by_value);
        printf("N = %d: MPI_Comm_split median %.4f ms (slowest rank; min %.4f, max %.3f; "
               "%d warm-ups, %d repetitions)\n",
               n, slowest[reps / 2] * 1e3, slowest[0] * 1e3, slowest[reps - 1] * 1e3, warmups,
               reps);
    }
    free(slowest);
    MPI_Finalize();
    return 0;
}
